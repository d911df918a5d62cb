"""tfpipe.records with a spec: checked against each file's first record up front, every record that does
not fit named by file, record number and key, labels that are never silently 0 (issues 32, 33 #9 #10 #14)."""

import os
import re

import pytest
import tensorflow as tf

import tfpipe
from tfpipe.errors import DataError

SPEC = {"id": tf.io.FixedLenFeature([], tf.int64), "label": tf.io.FixedLenFeature([], tf.int64)}
OPT = tfpipe.PipelineConfig.optimized(batch_size=4, seed=3)
NAIVE = tfpipe.PipelineConfig.naive(batch_size=4, seed=3)


def _feature(value):
    if isinstance(value, bytes):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
    if isinstance(value, float):
        return tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))


def example(**values):
    return tf.train.Example(features=tf.train.Features(feature={k: _feature(v) for k, v in values.items()}))


def write(path, records):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as w:
        for r in records:
            w.write(r.SerializeToString() if hasattr(r, "SerializeToString") else r)
    return path


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TFPIPE_CACHE_DIR", str(tmp_path / "cache"))


def test_spec_keys_the_records_lack_are_named_with_the_file_before_any_step(tmp_path):
    # TF-slim names on records written with other keys: refused by the scan, not at the first batch.
    good = write(str(tmp_path / "r" / "a.tfrecord"), [example(id=i, label=i % 2) for i in range(4)])
    other = write(str(tmp_path / "r" / "b.tfrecord"), [example(**{"image/class/label": 1, "id": 9})])
    slim = {"id": tf.io.FixedLenFeature([], tf.int64), "label": tf.io.FixedLenFeature([], tf.int64)}
    with pytest.raises(DataError, match=r"(?s)spec= does not fit 1 of 2 files.*b\.tfrecord: lacks 'label' \(the record "
                                        r"holds 'id' \(int64 x1\), 'image/class/label' \(int64 x1\)\)"):
        tfpipe.records([good, other], spec=slim, label_key="label", progress=False)
    wrong_dtype = {"id": tf.io.FixedLenFeature([], tf.float32), "label": tf.io.FixedLenFeature([], tf.int64)}
    with pytest.raises(DataError, match=r"a\.tfrecord: 'id' holds int64, spec asks float32"):
        tfpipe.records(good, spec=wrong_dtype, label_key="label", progress=False)
    wrong_shape = {"id": tf.io.FixedLenFeature([3], tf.int64), "label": tf.io.FixedLenFeature([], tf.int64)}
    with pytest.raises(DataError, match=r"'id' holds 1 values, spec asks 3"):
        tfpipe.records(good, spec=wrong_shape, label_key="label", progress=False)


@pytest.mark.parametrize("pipe", [OPT, NAIVE], ids=["vectorized", "per-example"])
@pytest.mark.parametrize("bad", ["missing", "dtype"])
def test_a_record_that_does_not_fit_mid_file_is_named_by_file_record_and_key(tmp_path, pipe, bad):
    wrong = example(id=5) if bad == "missing" else example(id=5, label=1.5)
    path = write(str(tmp_path / "r" / "a.tfrecord"), [example(id=i, label=0) for i in range(5)] + [wrong])
    source = tfpipe.records(path, spec=SPEC, label_key="label", progress=False)
    expected = (r"Feature: label \(data type: int64\) is required" if bad == "missing" else
                r"Key: label.*Data types don't match")
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(path) + r", record 5.*" + expected):
        list(tfpipe.build_dataset(source, "eval", pipe))


def test_sequence_example_records_are_pointed_to_process(tmp_path):
    seq = tf.train.SequenceExample()
    seq.context.feature["label"].int64_list.value.append(1)
    seq.feature_lists.feature_list["frames"].feature.add().float_list.value.extend([0.5, 0.25])
    path = write(str(tmp_path / "r" / "seq.tfrecord"), [seq])
    with pytest.raises(DataError, match=r"(?s)seq\.tfrecord: records are tf\.train\.SequenceExample \(feature_lists "
                                        r"'frames'\).*tf\.io\.parse_single_sequence_example"):
        tfpipe.records(path, spec={"label": tf.io.FixedLenFeature([], tf.int64)}, label_key="label",
                       progress=False)
    # With process= the user parses them: allowed.
    source = tfpipe.records(path, progress=False)

    def parse(record):
        context, lists = tf.io.parse_single_sequence_example(
            record, {"label": tf.io.FixedLenFeature([], tf.int64)},
            {"frames": tf.io.FixedLenSequenceFeature([2], tf.float32)})
        return {"frames": lists["frames"]}, context["label"]

    (features, labels), = tfpipe.build_dataset(source, "eval", NAIVE, process=parse).as_numpy_iterator()
    assert features["frames"].tolist() == [[[0.5, 0.25]]] and labels.tolist() == [1]


def test_eval_without_a_label_key_is_refused_unless_the_records_are_said_to_be_unlabeled(tmp_path):
    path = write(str(tmp_path / "r" / "a.tfrecord"), [example(id=i, label=7) for i in range(4)])
    spec = {"id": tf.io.FixedLenFeature([], tf.int64)}
    source = tfpipe.records(path, spec=spec, progress=False)
    with pytest.raises(ValueError, match=r"eval without label_key= would compare predictions against label 0.*"
                                         r"unlabeled=True"):
        tfpipe.build_dataset(source, "eval", OPT)
    predicted = tfpipe.build_dataset(source, "predict", OPT).as_numpy_iterator()
    assert [f["id"].tolist() for f in predicted] == [[0, 1, 2, 3]]
    unlabeled = tfpipe.records(path, spec=spec, unlabeled=True, progress=False)
    (_, labels), = tfpipe.build_dataset(unlabeled, "eval", OPT).as_numpy_iterator()
    assert labels.tolist() == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="name the label with label_key="):
        tfpipe.build_dataset(unlabeled, "train", OPT)


@pytest.mark.parametrize("pipe", [OPT, NAIVE], ids=["vectorized", "per-example"])
def test_class_names_look_up_labels_written_as_names(tmp_path, pipe):
    names = ["cat", "dog", "eel"]
    path = write(str(tmp_path / "r" / "a.tfrecord"), [example(id=i, label=names[i % 3].encode()) for i in range(6)])
    spec = {"id": tf.io.FixedLenFeature([], tf.int64), "label": tf.io.FixedLenFeature([], tf.string)}
    source = tfpipe.records(path, spec=spec, label_key="label", class_names=["ant", "cat", "dog", "eel"],
                            progress=False)
    labels = [int(x) for _, l in tfpipe.build_dataset(source, "eval", pipe).as_numpy_iterator() for x in l]
    assert labels == [1, 2, 3, 1, 2, 3]
    short = tfpipe.records(path, spec=spec, label_key="label", class_names=["cat", "dog"], progress=False)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"a\.tfrecord, record 2.*eel.*not one of class_names"):
        list(tfpipe.build_dataset(short, "eval", pipe))
    with pytest.raises(ValueError, match=r"holds class names \(tf\.string\): pass class_names="):
        tfpipe.build_dataset(tfpipe.records(path, spec=spec, label_key="label", progress=False), "eval", pipe)


def test_int_labels_beyond_the_pinned_class_names_are_named(tmp_path):
    path = write(str(tmp_path / "r" / "a.tfrecord"), [example(id=i, label=i) for i in range(4)])
    source = tfpipe.records(path, spec=SPEC, label_key="label", class_names=["a", "b", "c"], progress=False)
    assert source.class_names == ("a", "b", "c")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"a\.tfrecord, record 3.*not below the 3 class_names"):
        list(tfpipe.build_dataset(source, "eval", OPT))
