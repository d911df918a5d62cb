"""tfpipe.records: TFRecord files written by plain TensorFlow and by tensorflow_datasets, through the chain."""

import collections
import dataclasses
import os

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tests.support import tiny_tfds_builder
from tfpipe.config import TOGGLES
from tfpipe.core.graph import dataset_ops
from tfpipe.errors import DataError
from tfpipe.storage import tfrecord

SPEC = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
        "id": tf.io.FixedLenFeature([], tf.int64),
        "tokens": tf.io.VarLenFeature(tf.int64)}
OPT = tfpipe.PipelineConfig.optimized(batch_size=8, seed=3)
NAIVE = tfpipe.PipelineConfig.naive(batch_size=8, seed=3)


def _example(i):
    """A record in the ImageNet / TF-slim layout (JPEG bytes, class label), plus an id and i % 4 + 1 tokens."""
    image = tf.io.encode_jpeg(tf.fill([6, 6, 3], tf.constant(i % 250, tf.uint8))).numpy()
    feature = {"image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
               "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 3])),
               "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
               "tokens": tf.train.Feature(int64_list=tf.train.Int64List(value=list(range(i % 4 + 1))))}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_records(folder, shards=4, per_shard=10, compression=lambda s: "GZIP" if s % 2 else ""):
    """`shards` files written with tf.io.TFRecordWriter, every other one GZIP; record ids 0..N-1 in file order."""
    os.makedirs(folder, exist_ok=True)
    for s in range(shards):
        path = os.path.join(folder, f"train-{s:05d}-of-{shards:05d}")
        with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression_type=compression(s))) as writer:
            for i in range(s * per_shard, (s + 1) * per_shard):
                writer.write(_example(i))
    return os.path.join(folder, "train-*")


@pytest.fixture
def recs(tmp_path, monkeypatch):
    monkeypatch.setenv("TFPIPE_CACHE_DIR", str(tmp_path / "cache"))
    return write_records(str(tmp_path / "records"))


def _dense(value):
    """A parsed VarLenFeature from as_numpy_iterator as a dense array."""
    if hasattr(value, "dense_shape"):
        return tf.sparse.to_dense(tf.SparseTensor(value.indices, value.values, value.dense_shape)).numpy()
    return np.asarray(value)


def _ids(ds):
    return [int(x) for f, _ in ds.as_numpy_iterator() for x in f["id"]]


def test_eval_reads_every_record_once_in_file_order_plain_and_gzip(recs):
    source = tfpipe.records(recs, spec=SPEC, label_key="image/class/label")
    assert source.compressions == ("", "GZIP", "", "GZIP") and source.counts == (10,) * 4
    batches = list(tfpipe.build_dataset(source, "eval", OPT).as_numpy_iterator())
    assert [len(l) for _, l in batches] == [8] * 5
    assert [int(x) for f, _ in batches for x in f["id"]] == list(range(40))
    assert [int(x) for _, l in batches for x in l] == [i % 3 for i in range(40)]
    tokens = _dense(batches[0][0]["tokens"])
    assert tokens.shape == (8, 4) and list(tokens[2]) == [0, 1, 2, 0]  # VarLenFeature: a SparseTensor per batch


@pytest.mark.parametrize("toggle", TOGGLES)
def test_every_toggle_changes_speed_not_the_records(recs, toggle):
    source = tfpipe.records(recs, spec=SPEC, label_key="image/class/label")
    flipped = dataclasses.replace(OPT, **{toggle: getattr(NAIVE, toggle)})
    assert _ids(tfpipe.build_dataset(source, "eval", flipped)) == list(range(40))
    train = [int(x) for f, _ in tfpipe.build_dataset(source, "train", flipped).take(10).as_numpy_iterator()
             for x in f["id"]]
    assert set(train) <= set(range(40)) and len(set(train)) > 20


def test_the_optimized_and_naive_chains_over_records(recs):
    source = tfpipe.records(recs, spec=SPEC, label_key="image/class/label")
    # The order: each epoch's files read in a fixed order, records permuted in windows, re-cut into
    # batches and parsed on whole batches.
    assert dataset_ops(tfpipe.build_dataset(source, "train", OPT)) == [
        "RangeDataset", "FlatMapDataset", "MapDataset", "RebatchDatasetV2", "ParallelMapDatasetV2", "PrefetchDataset",
        "OptionsDataset"]
    # The seed's order: records one file after another, a whole-set shuffle, parse per record, batch, repeat.
    assert dataset_ops(tfpipe.build_dataset(source, "train", NAIVE)) == [
        "TensorSliceDataset", "FlatMapDataset", "ShuffleDatasetV3", "MapDataset", "BatchDatasetV2", "RepeatDataset",
        "OptionsDataset"]


def test_parsing_whole_batches_equals_parsing_each_record(recs):
    source = tfpipe.records(recs, spec=SPEC, label_key="image/class/label")
    vectorized = list(tfpipe.build_dataset(source, "eval", OPT).as_numpy_iterator())
    per_record = list(tfpipe.build_dataset(source, "eval", dataclasses.replace(OPT, vectorize=False)).as_numpy_iterator())
    for (f1, l1), (f2, l2) in zip(vectorized, per_record, strict=True):
        np.testing.assert_array_equal(l1, l2)
        np.testing.assert_array_equal(f1["image/encoded"], f2["image/encoded"])
        np.testing.assert_array_equal(_dense(f1["tokens"]), _dense(f2["tokens"]))


def test_your_process_function_gets_each_record(recs):
    def parse(record):
        f = tf.io.parse_single_example(record, SPEC)
        return {"image": tf.io.decode_jpeg(f["image/encoded"]), "id": f["id"]}, f["image/class/label"]

    batches = list(tfpipe.build_dataset(tfpipe.records(recs), "eval", OPT, process=parse).as_numpy_iterator())
    assert batches[0][0]["image"].shape == (8, 6, 6, 3)
    assert [int(x) for f, _ in batches for x in f["id"]] == list(range(40))
    with pytest.raises(ValueError, match=r"pass spec= .* or process=\(record\) -> \(features, label\)"):
        tfpipe.build_dataset(tfpipe.records(recs), "eval", OPT)
    with pytest.raises(ValueError, match="name the label with label_key="):
        tfpipe.build_dataset(tfpipe.records(recs, spec=SPEC), "train", OPT)


def test_resuming_at_a_step_continues_the_uninterrupted_stream(recs):
    source = tfpipe.records(recs, spec=SPEC, label_key="image/class/label")
    pipe = dataclasses.replace(OPT, deterministic=True)
    full = _ids(tfpipe.build_dataset(source, "train", pipe, start_step=0).take(12))
    later = _ids(tfpipe.build_dataset(source, "train", pipe, start_step=7).take(5))
    assert later == full[56:] and collections.Counter(full[:40]) == {i: 1 for i in range(40)}


def test_input_contexts_read_disjoint_files_that_cover_every_record(recs):
    source = tfpipe.records(recs, spec=SPEC, label_key="image/class/label")
    parts = [_ids(tfpipe.build_dataset(source, "eval", OPT, input_context=tf.distribute.InputContext(2, i, 2)))
             for i in (0, 1)]
    assert sorted(parts[0] + parts[1]) == list(range(40)) and not set(parts[0]) & set(parts[1])


def test_files_that_are_not_tfrecords_or_are_damaged_are_named_with_the_record(recs, tmp_path):
    folder = os.path.dirname(recs)
    with open(os.path.join(folder, "train-notes.txt"), "w") as f:
        f.write("not a record at all")
    plain = os.path.join(folder, "train-00000-of-00004")
    data = bytearray(open(plain, "rb").read())
    start = 0
    for _ in range(2):  # past records 0 and 1: header (12 bytes), data, data CRC (4 bytes)
        start += 12 + int.from_bytes(data[start:start + 8], "little") + 4
    data[start + 12 + 5] ^= 0xFF  # a byte inside record 2's data
    damaged = os.path.join(folder, "train-damaged")
    open(damaged, "wb").write(bytes(data))
    open(os.path.join(folder, "train-cut"), "wb").write(bytes(data[:30]))
    with pytest.raises(DataError) as e:
        tfpipe.records(recs, spec=SPEC, label_key="image/class/label")
    message = str(e.value)
    assert message.startswith("3 of 7 files cannot be read as TFRecords:")
    assert "train-notes.txt: not a TFRecord file: its first bytes are not a TFRecord header" in message
    assert "train-damaged: damaged: record 2's data fails its CRC check" in message
    assert "train-cut: cut short in record 0" in message


def test_counts_are_remembered_and_a_changed_file_is_scanned_again(recs):
    paths = tfrecord.files_in([recs])
    assert tfrecord.scan_all(paths)[2] == 4  # a new cache folder: every file scanned
    assert tfrecord.scan_all(paths)[2] == 0  # then remembered by path, size and modification time
    with open(paths[0], "ab") as f:
        f.write(b"")
    os.utime(paths[0], ns=(1, 1))  # same bytes, another modification time: scanned again
    assert tfrecord.scan_all(paths)[2] == 1


def test_a_folder_tensorflow_datasets_prepared_is_read_with_its_own_decoders(tmp_path, monkeypatch):
    pytest.importorskip("tensorflow_datasets")
    monkeypatch.setenv("TFPIPE_CACHE_DIR", str(tmp_path / "cache"))

    builder = tiny_tfds_builder("Tiny")(data_dir=str(tmp_path / "tfds"))
    builder.download_and_prepare()
    folder = builder.data_dir
    source = tfpipe.records(folder, split="test")
    assert source.class_names == ("cat", "dog", "eel") and source.num_examples == 9
    batches = list(tfpipe.build_dataset(source, "eval", tfpipe.PipelineConfig.optimized(batch_size=4)).as_numpy_iterator())
    assert sorted(int(i) for f, _ in batches for i in f["index"]) == list(range(9))
    features, labels = batches[0]
    assert features["image"].shape == (4, 8, 8, 3) and features["image"].dtype == np.uint8
    assert [int(x) for x in labels] == [int(i) % 3 for i in features["index"]]
    with pytest.raises(DataError, match=r"pass split= one of 'train', 'test'"):
        tfpipe.records(folder)
    # as_supervised: (image, label) as TFDS gives them, no feature_key; class_names renumbers by name.
    pipe = tfpipe.PipelineConfig.naive(batch_size=9)
    (images, labels), = tfpipe.build_dataset(tfpipe.records(folder, split="test", as_supervised=True), "eval",
                                             pipe).as_numpy_iterator()
    assert images.shape == (9, 8, 8, 3) and sorted(labels.tolist()) == sorted(i % 3 for i in range(9))
    pinned = tfpipe.records(folder, split="test", class_names=["ant", "eel", "dog", "cat"])
    (features, labels), = tfpipe.build_dataset(pinned, "eval", pipe).as_numpy_iterator()
    assert pinned.class_names == ("ant", "eel", "dog", "cat")
    assert [pinned.class_names[l] for l in labels] == [("cat", "dog", "eel")[int(i) % 3] for i in features["index"]]
    with pytest.raises(ValueError, match=r"classes 'eel' are not in class_names \('cat', 'dog'\)"):
        tfpipe.records(folder, split="test", class_names=["cat", "dog"])
    with pytest.raises(DataError, match=r"a folder tensorflow_datasets prepared; read it with tfpipe.records"):
        tfpipe.find(folder)


def test_records_and_mixtures_name_their_kind_where_files_of_a_domain_are_needed(recs, tmp_path):
    from tfpipe.train.keras import split_datasets

    source = tfpipe.records(recs)
    assert source.kind == "records" and tfpipe.mix([(source, 1.0)]).kind == "mixture"
    with pytest.raises(ValueError, match=r"a records source; write_shards needs a domain's files"):
        tfpipe.write_shards(source, str(tmp_path / "shards"), progress=False)
    with pytest.raises(ValueError, match=r"is a mixture source, which cannot be split by file"):
        split_datasets(tfpipe.mix([(source, 1.0)]), 0.2)


def test_a_folder_of_several_prefixes_is_refused_unless_split_picks_one(tmp_path, monkeypatch):
    monkeypatch.setenv("TFPIPE_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "records"
    write_records(str(folder), shards=2)
    for s in range(2):  # eval files beside train files, as a converter leaves them
        with tf.io.TFRecordWriter(str(folder / f"eval-{s:05d}-of-00002.tfrecord.gz"), "GZIP") as w:
            w.write(_example(100 + s))
    with pytest.raises(DataError, match=r"(?s)TFRecord files of 2 prefixes, which would be read as one set:.*"
                                        r"eval\*: 2 files.*train\*: 2 files.*pass split= one of"):
        tfpipe.records(str(folder))
    assert tfpipe.records(str(folder), split="eval").counts == (1, 1)
    assert tfpipe.records(str(folder), split="train").num_examples == 20
    with pytest.raises(DataError, match=r"no files of split='test'; its files' prefixes are 'eval', 'train'"):
        tfpipe.records(str(folder), split="test")


def test_records_holding_no_example_are_refused_before_training(tmp_path, monkeypatch):
    # 0 records in total: a train stream would spin forever (issue 33 #12, #15).
    monkeypatch.setenv("TFPIPE_CACHE_DIR", str(tmp_path / "cache"))
    empty = tmp_path / "empty"
    empty.mkdir()
    for s in range(2):
        tf.io.TFRecordWriter(str(empty / f"train-{s}.tfrecord")).close()
    source = tfpipe.records(str(empty), spec=SPEC, label_key="image/class/label")
    assert source.counts == (0, 0)
    message = r"2 files hold 0 examples \(records\): a train stream over them would never yield a batch"
    with pytest.raises(DataError, match=message):
        tfpipe.build_dataset(source, "train", OPT)
    with pytest.raises(DataError, match=message):
        tfpipe.build_dataset(source, "train", OPT, start_step=3)
    with pytest.raises(DataError, match=message):
        tfpipe.make_input_fn(source, "train", OPT)()
    full = tfpipe.records(write_records(str(tmp_path / "full")), spec=SPEC, label_key="image/class/label")
    with pytest.raises(DataError, match=message):
        tfpipe.build_dataset(tfpipe.mix([(full, 1.0), (source, 1.0)]), "train", OPT)
    assert list(tfpipe.build_dataset(source, "eval", OPT)) == []  # eval of nothing: nothing, at once


def test_as_supervised_yields_the_one_feature_besides_the_label(recs):
    spec = {"id": SPEC["id"], "image/class/label": SPEC["image/class/label"]}
    source = tfpipe.records(recs, spec=spec, label_key="image/class/label", as_supervised=True)
    ids, labels = next(tfpipe.build_dataset(source, "eval", OPT).as_numpy_iterator())
    assert ids.tolist() == list(range(8)) and labels.tolist() == [i % 3 for i in range(8)]
    with pytest.raises(ValueError, match=r"as_supervised=True yields one feature, but these records give "
                                         r"'image/encoded', 'id', 'tokens'; pick one with build_dataset"):
        tfpipe.records(recs, spec=SPEC, label_key="image/class/label", as_supervised=True)


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_an_encoded_image_key_goes_through_the_image_domains_decode_and_crop(tmp_path, monkeypatch, mode):
    # The same files, read as a class folder and as records with the key: the same images (eval: center
    # crop; train: a random crop of the right shape and dtype), at the image chain's per-example map.
    monkeypatch.setenv("TFPIPE_CACHE_DIR", str(tmp_path / "cache"))
    from PIL import Image

    rng = np.random.default_rng(0)
    paths = []
    with tf.io.TFRecordWriter(str(tmp_path / "photos.tfrecord")) as w:
        for i in range(6):
            path = tmp_path / "folder" / f"c{i % 2}" / f"{i}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 255, (40 + i, 30, 3), np.uint8)).save(path)
            paths.append(str(path))
            feature = {"image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[path.read_bytes()])),
                       "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2]))}
            w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    config = tfpipe.ImageConfig(height=16, width=16)
    source = tfpipe.records(str(tmp_path / "photos.tfrecord"), encoded_key="image/encoded",
                            label_key="image/class/label", features=config)
    pipe = tfpipe.PipelineConfig.optimized(batch_size=6, seed=1)
    features, labels = next(tfpipe.build_dataset(source, mode, pipe).as_numpy_iterator())
    assert list(features) == ["image"] and features["image"].shape == (6, 16, 16, 3)
    assert features["image"].dtype == np.float32
    ops = dataset_ops(tfpipe.build_dataset(source, mode, pipe))
    assert ops.count("ParallelMapDatasetV2") == 1 and ops.count("MapDataset") <= 1, ops  # parse + decode fused
    if mode == "eval":
        expected = [f["image"] for f, _ in tfpipe.build_dataset((paths, [i % 2 for i in range(6)]), "eval",
                                                                 tfpipe.PipelineConfig.naive(batch_size=6),
                                                                 features=config).as_numpy_iterator()]
        np.testing.assert_allclose(features["image"], expected[0], atol=1e-6)
        assert labels.tolist() == [i % 2 for i in range(6)]
        small = dataclasses.replace(config, dtype="uint8")
        uint8, _ = next(tfpipe.build_dataset(source, "eval", pipe, features=small).as_numpy_iterator())
        assert uint8["image"].dtype == np.uint8
    with pytest.raises(ValueError, match=r"encoded_key='image/encoded': pass features= the config of the domain "
                                         r"that decodes it \(one of .*Config"):
        tfpipe.records(str(tmp_path / "photos.tfrecord"), encoded_key="image/encoded", label_key="image/class/label")
