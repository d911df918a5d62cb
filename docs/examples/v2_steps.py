"""A v2 shard folder's train chain taken apart: what each step costs against read+parse (BUILD_NOTES).

    taskset -c 0 python docs/examples/v2_steps.py V2_DIR [SECONDS]

Each arm is a fresh process that builds the steps by hand in tf.data over the folder's files and
reports examples/s after a warm-up:

  read       the records read (parallel interleave) and parsed into blocks: the ceiling
  window     + blocks re-cut into windows of 1,024 examples
  permute    + each window permuted (one gather, parallel map)
  batch      + windows re-cut into batches of 64
  cast       + the float16 -> float32 cast on each batch (parallel map)
  full       tfpipe.build_dataset(V2_DIR, "train", PipelineConfig.optimized(batch_size=64))
"""

import subprocess
import sys

_ARM = """
import os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
import tfpipe

folder, arm, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
steps = ("read", "window", "permute", "batch", "cast")


def permute(x, y):
    index = tf.random.shuffle(tf.range(tf.shape(y)[0]))
    return tf.nest.map_structure(lambda t: tf.gather(t, index), (x, y))


def cast(x, y):
    return {k: tf.cast(v, tf.float32) if v.dtype == tf.float16 else v for k, v in x.items()}, y


if arm == "full":
    ds = tfpipe.build_dataset(folder, "train", tfpipe.PipelineConfig.optimized(batch_size=64))
else:
    source = tfpipe.find(folder).chain_input("train")
    upto = steps.index(arm)
    ds = source.files.repeat().interleave(source.expand, cycle_length=len(os.sched_getaffinity(0)),
                                          num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
    if upto >= 1:
        ds = ds.rebatch(1024)
    if upto >= 2:
        ds = ds.map(permute, num_parallel_calls=tf.data.AUTOTUNE)
    if upto >= 3:
        ds = ds.rebatch(64)
    if upto >= 4:
        ds = ds.map(cast, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.prefetch(tf.data.AUTOTUNE)
it = iter(ds)
for _ in range(30):
    next(it)
n, start = 0, time.perf_counter()
while time.perf_counter() - start < seconds:
    n += int(next(it)[1].shape[0])
print(n / (time.perf_counter() - start))
"""


def main(argv):
    folder, seconds = argv[1], argv[2] if len(argv) > 2 else "4"
    rates = {}
    for arm in ("read", "window", "permute", "batch", "cast", "full"):
        out = subprocess.run([sys.executable, "-c", _ARM, folder, arm, seconds], capture_output=True, text=True,
                             check=True).stdout
        rates[arm] = float(out.strip().splitlines()[-1])
        print(f"{arm:<8} {rates[arm]:>10,.0f} examples/s  {rates[arm] / rates['read']:.0%} of read+parse", flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv)
