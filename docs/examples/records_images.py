"""Decode-bound image TFRecords: a plain input_fn against tfpipe.records with the image key (issue 35).

    python docs/examples/records_images.py [WORK_DIR=/tmp/m/records_images] [NUM_IMAGES=2000] [ROUNDS=5]

Writes the photo corpus (docs/examples/photo_corpus.py: real photos, ImageNet's sizes and JPEG
quality) as 8 TFRecord files in the TF-slim layout (image/encoded, image/class/label), once, then
times two train input pipelines over them, alternating within each round:

  plain   what a user writes: TFRecordDataset(files, num_parallel_reads) -> shuffle -> one
          parallel map (parse, decode_jpeg, random crop, flip, resize, / 255) -> batch -> prefetch
  tfpipe  tfpipe.records(files, encoded_key="image/encoded", features=ImageConfig(224, 224)):
          the image domain's fused decode-and-crop (only the crop's JPEG blocks are decoded, at
          a reduced scale where the crop allows), in the same one parallel map as the parse

Each arm: a warm-up of WARMUP batches, then BATCHES (env, default 150: 30 timed mostly the ramp-up
of tf.data's autotuning, 1.12x where 150 give 1.26x) batches timed; examples/s per arm per round,
the ratio within each round, and the medians. Figures depend on the cores and the other load of
the machine: quote them with the machine (`nproc`, CPU model), measured on an otherwise idle host.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import photo_corpus  # noqa: E402  (the script beside this one)

import tfpipe  # noqa: E402

SIZE, BATCH, WARMUP, SHARDS = 224, 64, 5, 8
BATCHES = int(os.environ.get("BATCHES", 150))  # timed per arm and round: ~3 s, past the autotune ramp
SPEC = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64)}


def write_records(work_dir: str, num_images: int) -> list[str]:
    """The photo corpus as SHARDS TFRecord files (written once; the same bytes for the same arguments)."""
    out = os.path.join(work_dir, f"records-{num_images}")
    paths = [os.path.join(out, f"train-{s:05d}-of-{SHARDS:05d}.tfrecord") for s in range(SHARDS)]
    if all(os.path.exists(p) for p in paths):
        return paths
    photos = os.path.join(work_dir, f"photos-{num_images}")
    if not os.path.isdir(photos):
        photo_corpus.write_corpus(photos, num_images)
    source = tfpipe.find(photos)
    os.makedirs(out, exist_ok=True)
    writers = [tf.io.TFRecordWriter(p + ".tmp") for p in paths]
    for i, (path, label) in enumerate(zip(source.paths, source.labels)):
        with open(path, "rb") as f:
            feature = {"image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[f.read()])),
                       "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))}
        writers[i % SHARDS].write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    for w, p in zip(writers, paths):
        w.close()
        os.replace(p + ".tmp", p)
    return paths


def plain(paths: list[str]) -> tf.data.Dataset:
    """The hand-written input_fn: one parallel map that parses, decodes the whole JPEG, crops, resizes."""
    def parse(record):
        features = tf.io.parse_single_example(record, SPEC)
        image = tf.io.decode_jpeg(features["image/encoded"], channels=3)
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            tf.shape(image), tf.constant([[[0.0, 0.0, 1.0, 1.0]]]), min_object_covered=0.08,
            aspect_ratio_range=(3 / 4, 4 / 3), area_range=(0.08, 1.0), max_attempts=10,
            use_image_if_no_bounding_boxes=True)
        image = tf.image.random_flip_left_right(tf.slice(image, begin, size))
        image = tf.image.resize(image, [SIZE, SIZE]) / 255.0
        return {"image": tf.ensure_shape(image, [SIZE, SIZE, 3])}, features["image/class/label"]

    ds = tf.data.TFRecordDataset(paths, num_parallel_reads=tf.data.AUTOTUNE).repeat().shuffle(1024)
    return ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE).batch(BATCH).prefetch(tf.data.AUTOTUNE)


def with_tfpipe(paths: list[str]) -> tf.data.Dataset:
    source = tfpipe.records(paths, encoded_key="image/encoded", label_key="image/class/label",
                            features=tfpipe.ImageConfig(height=SIZE, width=SIZE, min_crop_area=0.08))
    return tfpipe.build_dataset(source, "train", tfpipe.PipelineConfig.optimized(batch_size=BATCH))


def rate(ds: tf.data.Dataset) -> float:
    """Examples/s over BATCHES batches, after WARMUP."""
    it = iter(ds)
    for _ in range(WARMUP):
        next(it)
    start = time.perf_counter()
    for _ in range(BATCHES):
        next(it)
    return BATCHES * BATCH / (time.perf_counter() - start)


def main(argv: list[str]) -> None:
    work_dir = argv[1] if len(argv) > 1 else "/tmp/m/records_images"
    num_images, rounds = (int(argv[2]) if len(argv) > 2 else 2000), (int(argv[3]) if len(argv) > 3 else 5)
    paths = write_records(work_dir, num_images)
    arms = {"plain": plain, "tfpipe": with_tfpipe}
    rates = {name: [] for name in arms}
    for r in range(rounds):
        order = list(arms) if r % 2 == 0 else list(reversed(arms))  # neither always goes first
        for name in order:
            rates[name].append(rate(arms[name](paths)))
        print(f"round {r + 1}: plain {rates['plain'][-1]:,.0f}/s, tfpipe {rates['tfpipe'][-1]:,.0f}/s "
              f"({rates['tfpipe'][-1] / rates['plain'][-1]:.2f}x)", flush=True)
    ratios = [t / p for t, p in zip(rates["tfpipe"], rates["plain"])]
    print(f"median of {rounds} rounds ({os.cpu_count()} cores, {SIZE}x{SIZE}, batch {BATCH}): plain "
          f"{statistics.median(rates['plain']):,.0f} examples/s, tfpipe.records with the image key "
          f"{statistics.median(rates['tfpipe']):,.0f} examples/s: {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main(sys.argv)
