"""The data every object-store test reads, made locally, and how it is read: one set of cases for ram:// and S3.

`make_data(folder)` writes small local copies of each kind of input tfpipe takes (a wav class
folder, an image class folder, a CSV manifest of wavs, TFRecords a user wrote, a folder that
tensorflow_datasets prepared); the tests copy them to the store and `read_all(root)` reads each
one from there in eval (every example once) and train (two epochs of the endless stream),
returning what came out to compare with `EXPECTED`.
"""

import collections
import dataclasses
import os


from tests.support import encode, make_corpus, pattern, write

# case -> (examples, examples per class, batch size that divides the examples)
EXPECTED = {"wavs": (12, [4, 4, 4], 4), "images": (9, [3, 3, 3], 3), "csv": (6, [2, 2, 2], 3),
            "records": (10, [4, 3, 3], 5), "tfds": (9, [3, 3, 3], 3)}
AUDIO = dict(clip_seconds=0.25)


def make_data(folder):
    """Writes wavs/, images/, manifest.csv, records/ and tfds/ under the local `folder`."""
    make_corpus(os.path.join(folder, "wavs"))
    for c, name in enumerate(("cat", "dog", "eel")):
        for i in range(3):
            write(os.path.join(folder, "images", name, f"{name}{i}.jpg"), encode(pattern(12, 16, seed=3 * c + i)))
    rows = [f"wavs/{c}/{c}{i:03d}.wav,{c}" for c in "abc" for i in range(2)]
    write(os.path.join(folder, "manifest.csv"), ("path,label\n" + "\n".join(rows) + "\n").encode())
    _write_records(os.path.join(folder, "records"))
    _write_tfds(os.path.join(folder, "tfds_build"), os.path.join(folder, "tfds"))
    return folder


def _write_records(folder):
    import tensorflow as tf

    os.makedirs(folder, exist_ok=True)
    for s in range(2):
        with tf.io.TFRecordWriter(os.path.join(folder, f"train-{s:05d}-of-00002")) as writer:
            for i in range(5 * s, 5 * s + 5):
                feature = {"id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
                           "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 3]))}
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def _write_tfds(build_dir, out):
    """A tiny dataset prepared by tensorflow_datasets itself (no download), its folder copied to `out`."""
    import shutil

    from tests.support import tiny_tfds_builder

    builder = tiny_tfds_builder("ObjstoreTiny", train=12)(data_dir=build_dir)  # named apart from test_records'
    builder.download_and_prepare()
    shutil.copytree(builder.data_dir, out)


def sources(root):
    """case -> the Source (or data) tfpipe reads at `root` (a ram:// or s3:// folder holding make_data's files)."""
    import tensorflow as tf

    import tfpipe

    spec = {"id": tf.io.FixedLenFeature([], tf.int64), "label": tf.io.FixedLenFeature([], tf.int64)}
    return {"wavs": f"{root}/wavs", "images": f"{root}/images", "csv": f"{root}/manifest.csv",
            "records": tfpipe.records(f"{root}/records/train-*", spec=spec, label_key="label", progress=False),
            "tfds": tfpipe.records(f"{root}/tfds", split="test")}


def read(data, case):
    """{"eval": labels per class of one eval pass, "train": labels per class of two epochs of train}."""
    import tfpipe

    total, _, batch = EXPECTED[case]
    # deterministic: the first two epochs' worth of the train stream is then exactly two epochs (with
    # parallel maps out of order, an example of the third epoch may overtake one of the second).
    pipe = dataclasses.replace(tfpipe.PipelineConfig.optimized(batch_size=batch, seed=1), deterministic=True)
    features = tfpipe.AudioConfig(**AUDIO) if case in ("wavs", "csv") else None
    out = {}
    for mode, batches in (("eval", None), ("train", 2 * total // batch)):
        ds = tfpipe.build_dataset(data, mode, pipe, features=features)
        ds = ds.take(batches) if batches else ds
        counts = collections.Counter(int(label) for _, labels in ds.as_numpy_iterator() for label in labels)
        out[mode] = [counts[i] for i in range(max(counts) + 1)] if counts else []
    return out


def expected(case):
    _, per_class, _ = EXPECTED[case]
    return {"eval": per_class, "train": [2 * n for n in per_class]}
