"""The v2 (block) shard chain taken apart: each piece added alone, in one process (BUILD_NOTES, "Shard formats").

Every arm reads the folder's shards in a parallel interleave (files repeated and shuffled) and
adds pieces of the train chain by hand; "tfpipe" is build_dataset itself. Elements/s are blocks
(~62 examples here) for "records" and "parse", batches of 64 for the rest. Medians of 3 runs
of 2 s after 20 elements of warm-up; compare arms within one run.

    taskset -c 0,1 python docs/examples/block_chain_pieces.py V2_DIR [ARM ...]
"""

import glob
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

import tfpipe  # noqa: E402

AUTOTUNE = tf.data.AUTOTUNE


def arms(folder: str) -> dict:
    """Arm name -> a function making its dataset."""
    source = tfpipe.find(folder)
    codec, keys = source.codec, list(source.codec.fields)
    stored = [k for k in keys if not codec.fields[k].is_string]
    files = sorted(glob.glob(os.path.join(folder, "*.tfrecord")))

    def records(buffer_size=None):
        ds = tf.data.Dataset.from_tensor_slices(files).repeat().shuffle(len(files))
        return ds.interleave(lambda f: tf.data.TFRecordDataset(f, buffer_size=buffer_size), cycle_length=4,
                             num_parallel_calls=AUTOTUNE, deterministic=False)

    def parse(record):
        values, labels = codec.decode_block(record, stored)
        return values, labels

    def permute(values, labels, cast=False):
        order = tf.random.shuffle(tf.range(tf.shape(labels)[0]))
        return {k: tf.cast(tf.gather(v, order), tf.float32) if cast else tf.gather(v, order)
                for k, v in values.items()}, tf.gather(labels, order)

    def cast(values, labels):
        return {k: tf.cast(v, tf.float32) for k, v in values.items()}, labels

    def parsed(buffer_size=None):
        return records(buffer_size).map(parse, num_parallel_calls=AUTOTUNE)

    def window():
        return parsed().shuffle(24).rebatch(1024)

    return {
        "records": records,
        "records, 8 MiB buffer": lambda: records(8 << 20),
        "parse": parsed,
        "parse, 8 MiB buffer": lambda: parsed(8 << 20),
        "parse + re-cut": lambda: parsed().rebatch(64),
        "parse + re-cut + cast": lambda: parsed().rebatch(64).map(cast, num_parallel_calls=AUTOTUNE),
        "window gather, re-cut, cast (the chain's order)": lambda: window().map(
            permute, num_parallel_calls=AUTOTUNE).rebatch(64).map(cast, num_parallel_calls=AUTOTUNE),
        "window gather with the cast, re-cut": lambda: window().map(
            lambda v, l: permute(v, l, cast=True), num_parallel_calls=AUTOTUNE).rebatch(64),
        "block permutation with the cast, block shuffle, re-cut": lambda: parsed().map(
            lambda v, l: permute(v, l, cast=True), num_parallel_calls=AUTOTUNE).shuffle(24).rebatch(64),
        "tfpipe": lambda: tfpipe.build_dataset(folder, "train", tfpipe.PipelineConfig.optimized(batch_size=64)),
    }


def rate(ds, seconds: float = 2.0) -> float:
    """Elements per second after a warm-up."""
    it = iter(ds)
    for _ in range(20):
        next(it)
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        next(it)
        n += 1
    return n / (time.perf_counter() - start)


def main(folder: str, *names: str) -> None:
    made = arms(folder)
    for name in names or made:
        ds = made[name]()
        print(f"{name:56s} {statistics.median(rate(ds) for _ in range(3)):8,.0f} elements/s", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
