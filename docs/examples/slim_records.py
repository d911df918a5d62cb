"""TFRecords in the ImageNet / TF-slim layout, written with plain TensorFlow, read three ways.

    python docs/examples/slim_records.py write /tmp/m/slim 2000     # 8 shards of JPEG records
    RECORDS=/tmp/m/slim tfpipe bench --dataset_fn docs/examples/slim_records.py:dataset_fn \\
        --variants naive,optimized --input_fn docs/examples/slim_records.py:plain_input_fn

`plain_input_fn` is what a user writes first: TFRecordDataset(files).map(parse).batch(64).prefetch(1);
`dataset_fn` is the same parse on tfpipe's chain (each bench variant's toggles applied). Both parse
and decode each JPEG; `plain_parse_input_fn` / `parse_dataset_fn` only parse (the image stays encoded,
for a model that decodes on the accelerator, or a later stage): that is where the records' own
cost shows.
"""

import glob
import io
import os
import sys

import numpy as np
import tensorflow as tf

import tfpipe

RECORDS = os.environ.get("RECORDS", "/tmp/m/slim")
SPEC = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64)}
SIZE = 64  # pixels: each image is decoded and resized to SIZE x SIZE


def _decode(features, label):
    """Per example: the JPEG decoded and resized (after tfpipe parsed the record)."""
    image = tf.io.decode_jpeg(features["image/encoded"], channels=3)
    image = tf.image.resize(image, [SIZE, SIZE]) / 255.0
    return {"image": tf.ensure_shape(image, [SIZE, SIZE, 3])}, label


def _parse(record):
    """The plain input_fn's map: parse one record, then the same decode."""
    features = tf.io.parse_single_example(record, SPEC)
    return _decode(features, features["image/class/label"])


def files(folder=RECORDS):
    return sorted(glob.glob(os.path.join(folder, "train-*")))


def dataset_fn(pipeline, mode):
    """tfpipe's chain: files shuffled, parallel interleave, record shuffle, parse + decode (fused, parallel)."""
    source = tfpipe.records(files(), spec=SPEC, label_key="image/class/label")
    return tfpipe.build_dataset(source, mode, pipeline, process=_decode)


def plain_input_fn(params=None, mode="train"):
    """What a user writes first."""
    batch = (params or {}).get("batch_size", 64)
    ds = tf.data.TFRecordDataset(files()).map(_parse).batch(batch).prefetch(1)
    return ds.repeat() if mode == "train" else ds


def parse_dataset_fn(pipeline, mode):
    """tfpipe's chain, parse only: with vectorize, one parse_example per batch."""
    source = tfpipe.records(files(), spec=SPEC, label_key="image/class/label")
    return tfpipe.build_dataset(source, mode, pipeline)


def plain_parse_input_fn(params=None, mode="train"):
    """What a user writes first, parse only."""
    def parse(record):
        features = tf.io.parse_single_example(record, SPEC)
        return {"image/encoded": features["image/encoded"]}, features["image/class/label"]

    batch = (params or {}).get("batch_size", 64)
    ds = tf.data.TFRecordDataset(files()).map(parse).batch(batch).prefetch(1)
    return ds.repeat() if mode == "train" else ds


def write(folder, n, shards=8, seed=0):
    """n JPEG records (64-160 px sides, 10 classes) in `shards` files, with tf.io.TFRecordWriter."""
    from PIL import Image

    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    writers = [tf.io.TFRecordWriter(os.path.join(folder, f"train-{s:05d}-of-{shards:05d}")) for s in range(shards)]
    for i in range(n):
        h, w = rng.integers(64, 161, size=2)
        ys, xs = np.mgrid[0:h, 0:w]
        pixels = np.stack([(xs * (i % 7 + 1)) % 256, (ys * (i % 5 + 1)) % 256, (xs + ys + i) % 256], -1)
        out = io.BytesIO()
        Image.fromarray((pixels + rng.normal(0, 8, pixels.shape)).clip(0, 255).astype(np.uint8)).save(out, "JPEG",
                                                                                                         quality=90)
        example = tf.train.Example(features=tf.train.Features(feature={
            "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[out.getvalue()])),
            "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 10]))}))
        writers[i % shards].write(example.SerializeToString())
    for writer in writers:
        writer.close()


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "write":
        sys.exit(__doc__)
    write(sys.argv[2], int(sys.argv[3]))
