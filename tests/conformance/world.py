"""The conformance matrix's data: every source kind, tiny, each example carrying an id.

An id survives each kind's own features: a wav's samples are one constant value, an image is one
flat colour, your own files, shards and records hold it as a feature. `Kind.ids(features)` reads
it back with TensorFlow ops, so the same function serves eager iteration, an Estimator's graph and
a Keras train step. `Kind.order` is the input order, found without tfpipe (the listing's sort, or
plain tf.data over the record files); `Kind.names` maps an id to its class name.
"""

import dataclasses
import os
from typing import Any, Callable

import numpy as np
import soundfile as sf
import tensorflow as tf
from PIL import Image

import tfpipe

BATCH = 4
WAV_RATE, WAV_SAMPLES, WAV_STEP = 16000, 320, 100  # 20 ms clips; sample value = WAV_STEP * (id + 1)
AUDIO = tfpipe.AudioConfig(output="waveform", clip_seconds=WAV_SAMPLES / WAV_RATE)
IMAGE = tfpipe.ImageConfig(height=8, width=8, dtype="uint8")
CLASSES = ("ant", "bee", "cat")
PER_CLASS = 8  # 24 examples a source: 6 batches of 4 an epoch


@dataclasses.dataclass(frozen=True)
class Kind:
    """One source kind of the matrix.

    Attributes:
      name: the matrix's name for it.
      data: () -> what build_dataset takes (a fresh Source each call, as a user's input_fn makes).
      ids: features (dict of batched tensors) -> int64 ids [batch].
      order: ids in input order: what eval and predict must yield.
      names: id -> class name (None where the labels are plain ints).
      labels: id -> label id the source gives (where names is None).
      kwargs: build_dataset keyword arguments (read=, process=, features=).
      variable: examples differ in length (padded, or bucketed with bucket_boundaries).
      files: files the examples are in (input contexts split by file).
    """

    name: str
    data: Callable[[], Any]
    ids: Callable[[Any], tf.Tensor]
    order: tuple
    names: Any = None
    labels: Any = None
    kwargs: dict = dataclasses.field(default_factory=dict)
    variable: bool = False
    files: int = 3


def _wav(path, example_id):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    sf.write(path, np.full(WAV_SAMPLES, WAV_STEP * (example_id + 1), np.int16), WAV_RATE, subtype="PCM_16")


def _png(path, example_id):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    colour = (4 * (example_id % 64) + 2, 4 * (example_id // 64) + 2, 200)  # +-1 survives resizing
    Image.fromarray(np.full((16, 16, 3), colour, np.uint8)).save(path)


def _class_folder(root, write, suffix, classes=CLASSES, first_id=0):
    """classes x PER_CLASS files; returns {id: class}, ids numbered in listing order."""
    names, i = {}, first_id
    for c in classes:
        for k in range(PER_CLASS):
            write(os.path.join(root, c, f"{c}{k:02d}{suffix}"), i)
            names[i], i = c, i + 1
    return names


def wav_ids(features):
    return tf.cast(tf.round(features["waveform"][:, 0] * 32768.0 / WAV_STEP), tf.int64) - 1


def image_ids(features):
    pixel = tf.cast(features["image"][:, 0, 0, :2], tf.int64)
    return (pixel[:, 0] + 1) // 4 + 64 * ((pixel[:, 1] + 1) // 4)


def feature_ids(features):
    return tf.cast(features["id"], tf.int64)


# Your own files and functions: a text file holding its id; examples vary in length (id % 5 + 1 tokens).
def read_text(path, label):
    return tf.io.read_file(path), label


def process_text(contents, label):
    example_id = tf.strings.to_number(contents, tf.int64)
    return {"id": example_id, "tokens": tf.range(example_id % 5 + 1)}, label


_SPEC = {"id": tf.io.FixedLenFeature([], tf.int64), "label": tf.io.FixedLenFeature([], tf.int64)}


def parse_record(record):
    """A user's process= over TFRecords: variable-length tokens, as process_text."""
    parsed = tf.io.parse_single_example(record, _SPEC)
    return {"id": parsed["id"], "tokens": tf.range(parsed["id"] % 5 + 1)}, parsed["label"]


def _example(example_id, label):
    feature = {"id": tf.train.Feature(int64_list=tf.train.Int64List(value=[example_id])),
               "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _record_files(root, ids, labels, files=3):
    """ids spread over `files` TFRecord files in a shuffled order (as a writer would leave them)."""
    os.makedirs(root, exist_ok=True)
    rng = np.random.default_rng(7)
    order = rng.permutation(len(ids))
    paths = [os.path.join(root, f"train-{k}.tfrecord") for k in range(files)]
    for k, path in enumerate(paths):
        with tf.io.TFRecordWriter(path) as w:
            for j in order[k::files]:
                w.write(_example(ids[j], labels[j]))
    return paths


def _image_records(root, ids, labels, files=3):
    """PNGs (the image kind's flat colours) inside tf.train.Examples under "image", in shuffled order;
    returns the ids in the files' order."""
    os.makedirs(root, exist_ok=True)
    order = np.random.default_rng(11).permutation(len(ids))
    for k in range(files):
        with tf.io.TFRecordWriter(os.path.join(root, f"train-{k}.tfrecord")) as w:
            for j in order[k::files]:
                colour = (4 * (ids[j] % 64) + 2, 4 * (ids[j] // 64) + 2, 200)
                png = tf.io.encode_png(np.full((16, 16, 3), colour, np.uint8)).numpy()
                feature = {"image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[png])),
                           "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[labels[j]]))}
                w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return tuple(int(ids[j]) for k in range(files) for j in order[k::files])  # the ids in file order


def records_order(paths):
    """Ids in the records' own order, read with plain tf.data (no tfpipe)."""
    ds = tf.data.TFRecordDataset(paths).map(lambda r: tf.io.parse_single_example(r, _SPEC)["id"])
    return tuple(int(i) for i in ds.as_numpy_iterator())


def _tfds_folder(root, ids, labels):
    import tensorflow_datasets as tfds

    class ConformanceIds(tfds.core.GeneratorBasedBuilder):
        """ids with class labels, written by tensorflow_datasets itself."""

        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({
                "id": tfds.features.Scalar(dtype=np.int64), "label": tfds.features.ClassLabel(names=list(CLASSES))}))

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            for i, label in zip(ids, labels):
                yield int(i), {"id": int(i), "label": int(label)}

    builder = ConformanceIds(data_dir=root)
    builder.download_and_prepare()
    return builder.data_dir


def build(root):
    """Writes every kind's data under `root`; returns {name: Kind}."""
    root = str(root)
    kinds = {}
    wav_names = _class_folder(os.path.join(root, "wav"), _wav, ".wav")
    wav_order = tuple(sorted(wav_names))
    kinds["wav"] = Kind("wav", lambda: os.path.join(root, "wav"), wav_ids, wav_order, wav_names,
                        kwargs={"features": AUDIO}, files=len(wav_order))
    img_names = _class_folder(os.path.join(root, "image"), _png, ".png")
    kinds["image"] = Kind("image", lambda: os.path.join(root, "image"), image_ids, tuple(sorted(img_names)),
                          img_names, kwargs={"features": IMAGE}, files=len(img_names))
    # A CSV whose rows are not in class order, with named labels: ids follow the manifest's own order.
    csv_path = os.path.join(root, "manifest.csv")
    rows = sorted(wav_names, key=lambda i: (i * 7) % 24)
    with open(csv_path, "w") as f:
        f.write("path,label\n" + "".join(f"wav/{wav_names[i]}/{wav_names[i]}{i % PER_CLASS:02d}.wav,{wav_names[i]}\n"
                                         for i in rows))
    kinds["csv"] = Kind("csv", lambda: csv_path, wav_ids, tuple(sorted(rows, key=lambda i: wav_names[i])),
                        wav_names, kwargs={"features": AUDIO}, files=len(rows))
    # Your files and functions.
    text_names = {}
    for i in range(len(CLASSES) * PER_CLASS):
        c = CLASSES[i % 3]
        os.makedirs(os.path.join(root, "text", c), exist_ok=True)
        with open(os.path.join(root, "text", c, f"{i:02d}.txt"), "w") as f:
            f.write(str(i))
        text_names[i] = c
    text_paths = [os.path.join(root, "text", text_names[i], f"{i:02d}.txt") for i in range(24)]
    text_labels = [CLASSES.index(text_names[i]) for i in range(24)]
    kinds["files+fns"] = Kind("files+fns", lambda: (list(text_paths), list(text_labels)), feature_ids,
                              tuple(range(24)), None, dict(zip(range(24), text_labels)),
                              kwargs={"read": read_text, "process": process_text}, variable=True, files=24)
    # Shards, v1 and v2, written from your examples.
    ids, labels = list(range(24)), [i % 3 for i in range(24)]
    for fmt, name in (("tfrecord-example", "shards-v1"), ("tfrecord-block", "shards-v2")):
        out = os.path.join(root, name)
        tfpipe.write_shards(({"id": np.int64(i), "label": l} for i, l in zip(ids, labels)), out, num_shards=3,
                            num_workers=0, format=fmt, progress=False)
        order = tuple(int(i) for f, _ in tfpipe.build_dataset(out, "eval", tfpipe.PipelineConfig.naive(
            batch_size=64)).as_numpy_iterator() for i in f["id"])  # index order, checked below against records
        kinds[name] = Kind(name, lambda out=out: out, feature_ids, order, None, dict(zip(ids, labels)))
    # TFRecords a user wrote (not tfpipe), read with spec= and with process=.
    paths = _record_files(os.path.join(root, "records"), ids, labels)
    pattern = os.path.join(root, "records", "train-*.tfrecord")
    kinds["records+spec"] = Kind("records+spec", lambda: tfpipe.records(pattern, spec=_SPEC, label_key="label",
                                                                        progress=False),
                                 feature_ids, records_order(paths), None, dict(zip(ids, labels)))
    kinds["records+process"] = Kind("records+process", lambda: tfpipe.records(pattern, progress=False), feature_ids,
                                    records_order(paths), None, dict(zip(ids, labels)),
                                    kwargs={"process": parse_record}, variable=True)
    # The same ids as image records, decoded by the image domain's fused decode-and-crop.
    image_order = _image_records(os.path.join(root, "image-records"), ids, labels)
    image_pattern = os.path.join(root, "image-records", "train-*.tfrecord")
    kinds["records+image"] = Kind("records+image", lambda: tfpipe.records(image_pattern, encoded_key="image",
                                                                          label_key="label", features=IMAGE,
                                                                          progress=False),
                                  image_ids, image_order, None, dict(zip(ids, labels)))
    folder = _tfds_folder(os.path.join(root, "tfds"), ids, labels)
    tfds_paths = sorted(tf.io.gfile.glob(os.path.join(folder, "*.tfrecord*")))
    kinds["tfds"] = Kind("tfds", lambda: tfpipe.records(folder, split="train", label_key="label", progress=False),
                         feature_ids, records_order(tfds_paths), {i: CLASSES[l] for i, l in zip(ids, labels)},
                         files=len(tfds_paths))
    # A mixture of two wav folders whose class sets differ: "bee" is in both.
    first = _class_folder(os.path.join(root, "mix-a"), _wav, ".wav", ("ant", "bee"), first_id=100)
    second = _class_folder(os.path.join(root, "mix-b"), _wav, ".wav", ("bee", "cat"), first_id=200)
    kinds["mixture"] = Kind("mixture", lambda: tfpipe.mix([(os.path.join(root, "mix-a"), 1.0),
                                                           (os.path.join(root, "mix-b"), 1.0)]),
                            wav_ids, tuple(sorted(first)) + tuple(sorted(second)), {**first, **second},
                            kwargs={"features": AUDIO}, files=32)
    return kinds


def lacking(root, kinds, missing="bee"):
    """Eval data of each class-named kind without the class `missing`: {name: (data, kwargs, ids, names)}."""
    root = str(root)
    kept = tuple(c for c in CLASSES if c != missing)
    out = {}
    wav_names = _class_folder(os.path.join(root, "wav"), _wav, ".wav", kept)
    out["wav"] = (os.path.join(root, "wav"), kinds["wav"].kwargs, wav_ids, wav_names)
    img_names = _class_folder(os.path.join(root, "image"), _png, ".png", kept)
    out["image"] = (os.path.join(root, "image"), kinds["image"].kwargs, image_ids, img_names)
    csv_path = os.path.join(root, "manifest.csv")
    with open(csv_path, "w") as f:
        f.write("path,label\n" + "".join(f"wav/{c}/{c}{i % PER_CLASS:02d}.wav,{c}\n" for i, c in wav_names.items()))
    out["csv"] = (csv_path, kinds["csv"].kwargs, wav_ids, wav_names)
    shards = os.path.join(root, "shards")
    tfpipe.write_shards(os.path.join(root, "wav"), shards, num_shards=2, num_workers=0, features=AUDIO,
                        store="waveform", progress=False)
    out["shards"] = (shards, kinds["wav"].kwargs, wav_ids, wav_names)
    spec = {"id": tf.io.FixedLenFeature([], tf.int64), "label": tf.io.FixedLenFeature([], tf.string)}
    path = os.path.join(root, "named.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for i, c in wav_names.items():
            feature = {"id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
                       "label": tf.train.Feature(bytes_list=tf.train.BytesList(value=[c.encode()]))}
            w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    out["records"] = (tfpipe.records(path, spec=spec, label_key="label", progress=False), {}, feature_ids,
                      wav_names)
    out["mixture"] = (tfpipe.mix([(os.path.join(root, "wav"), 1.0), (csv_path, 1.0)]), kinds["wav"].kwargs,
                      wav_ids, wav_names)
    return out
