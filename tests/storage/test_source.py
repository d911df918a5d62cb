"""storage/source.py: a shard folder read through the chain; what is checked when it is built and while reading."""

import dataclasses
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.core.graph import dataset_ops, walk


FEAT = tfpipe.AudioConfig(clip_seconds=0.25)


def _write(data, out, **kwargs):
    kwargs = {"num_shards": 3, "num_workers": 0, "features": FEAT, "progress": False, **kwargs}
    return tfpipe.write_shards(data, out, **kwargs)


def _log_mels(data, features=FEAT, batch_size=5, **kwargs):
    pipe = tfpipe.PipelineConfig.optimized(batch_size=batch_size)
    return np.concatenate([x["log_mel"].numpy() for x, _ in tfpipe.build_dataset(data, "eval", pipe, features,
                                                                                  **kwargs)])


def test_shards_split_across_input_pipelines_cover_everything_once(corpus, tmp_path):
    _write(corpus, tmp_path / "shards")
    parts = [_log_mels(tmp_path / "shards", input_context=tf.distribute.InputContext(2, i)) for i in (0, 1)]
    assert len(parts[0]) + len(parts[1]) == 12
    whole = _log_mels(tmp_path / "shards")
    assert sorted(map(bytes, np.concatenate(parts))) == sorted(map(bytes, whole))


def test_train_mode_is_endless_and_float32(corpus, tmp_path):
    _write(corpus, tmp_path / "shards")
    ds = tfpipe.build_dataset(tmp_path / "shards", "train", tfpipe.PipelineConfig.optimized(batch_size=5, seed=1),
                              FEAT)
    batches = list(ds.take(10))  # 50 examples from 12: repeats
    assert len(batches) == 10
    assert batches[0][0]["log_mel"].dtype == tf.float32 and batches[0][1].dtype == tf.int64
    assert batches[0][0]["log_mel"].shape == (5, FEAT.num_frames, FEAT.n_mels)


def test_variable_length_shards_train_in_padded_batches(tmp_path):
    examples = [{"t": np.arange(n) + 1, "label": n % 2} for n in range(1, 13)]
    tfpipe.write_shards(examples, tmp_path / "s", num_shards=3, progress=False)
    ds = tfpipe.build_dataset(tmp_path / "s", "train", tfpipe.PipelineConfig.optimized(batch_size=4, seed=1))
    for features, labels in ds.take(6).as_numpy_iterator():
        lengths = (features["t"] > 0).sum(axis=1)
        assert features["t"].shape[1] == lengths.max()  # padded to the batch's longest, no further
        assert [row[:k].tolist() for row, k in zip(features["t"], lengths)] == [list(range(1, k + 1))
                                                                               for k in lengths]
        assert labels.tolist() == [k % 2 for k in lengths]


def test_features_other_than_stored_fail_naming_the_field(corpus, tmp_path):
    _write(corpus, tmp_path / "shards")
    with pytest.raises(tfpipe.DataError, match=r"tfpipe.json.*n_mels=64 \(pipeline asks for 32\).*prepare"):
        tfpipe.build_dataset(tmp_path / "shards", "eval", None, dataclasses.replace(FEAT, n_mels=32))
    with pytest.raises(tfpipe.DataError, match=r"log-mel.*--store waveform"):
        tfpipe.build_dataset(tmp_path / "shards", "eval", None, dataclasses.replace(FEAT, output="waveform"))


def test_shards_default_to_the_features_they_were_written_with(corpus, tmp_path):
    written = dataclasses.replace(FEAT, n_mels=32, hop_length=200)
    _write(corpus, tmp_path / "shards", features=written)
    ds = tfpipe.build_dataset(tmp_path / "shards", "eval")  # no AudioConfig: the index's is used
    assert ds.element_spec[0]["log_mel"].shape.as_list() == [None, written.num_frames, 32]


# --- damage: found when the dataset is built, or named while reading -------------------------------

def test_shard_with_wrong_size_or_no_read_access_fails_when_the_dataset_is_built(corpus, tmp_path):
    out = tmp_path / "shards"
    index = _write(corpus, out)
    victim = out / index["shards"][2]["file"]
    if os.geteuid() != 0:  # root reads a chmod 000 file
        os.chmod(victim, 0)
        with pytest.raises(tfpipe.DataError, match=rf"{re.escape(str(victim))}: shard cannot be read \(permission "
                                                   rf"denied\); give this user read access"):
            tfpipe.build_dataset(out, "train", None, FEAT)
        os.chmod(victim, 0o644)
    with open(victim, "r+b") as f:
        f.truncate(victim.stat().st_size - 100)
    with pytest.raises(tfpipe.DataError, match=rf"{re.escape(str(victim))}: damaged shard: \d+ bytes on disk but "
                                               rf".* lists"):
        tfpipe.build_dataset(out, "train", None, FEAT)


def _flip_a_byte(path):
    with open(path, "r+b") as f:  # the middle byte: same size, bad CRC
        f.seek(f.seek(0, os.SEEK_END) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))


@pytest.mark.parametrize("fmt", ["tfrecord-block", "tfrecord-example"])
def test_damaged_or_edited_shards_fail_on_read_naming_the_shard(corpus, tmp_path, fmt):
    out = tmp_path / "s"
    _write(corpus, out, num_shards=2, format=fmt)
    path = os.path.join(out, "tfpipe.json")
    index = json.load(open(path))
    shard = index["shards"][1]
    shard["num_examples"] -= 1
    shard["num_records"] = max(1, shard["num_records"] - 1) if fmt == "tfrecord-example" else 1
    index["num_examples"] -= 1
    json.dump(index, open(path, "w"))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"train-00001-of-00002.tfrecord: (more records|"
                                                             r"damaged shard: a block holds)"):
        _log_mels(out)
    _write(corpus, tmp_path / "t", num_shards=2, format=fmt)
    _flip_a_byte(tmp_path / "t" / "train-00000-of-00002.tfrecord")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"train-00000-of-00002.tfrecord: cannot be read to the "
                                                             r"end: fewer readable records"):
        _log_mels(tmp_path / "t")


_READ_AFTER_REMOVING = """
import os, sys, time
import tensorflow as tf
import tfpipe
ds = tfpipe.build_dataset(sys.argv[1], "eval", tfpipe.PipelineConfig.optimized(batch_size=4),
                          tfpipe.AudioConfig(clip_seconds=0.25))
os.remove(sys.argv[2])  # after the build: e.g. a prepare rerun with fewer shards removed it
start = time.monotonic()
try:
    n = sum(len(labels) for _, labels in ds)
    print(f"read {n} examples")
except tf.errors.InvalidArgumentError as e:
    print(f"after {time.monotonic() - start:.1f} s: " + e.message.splitlines()[0])
"""


def test_a_shard_removed_after_the_build_is_a_named_error_not_a_hang(corpus, tmp_path):
    index = _write(corpus, tmp_path / "s", num_shards=4)
    victim = str(tmp_path / "s" / index["shards"][2]["file"])
    out = subprocess.run([sys.executable, "-c", _READ_AFTER_REMOVING, str(tmp_path / "s"), victim],
                         capture_output=True, text=True, timeout=90)  # before: spun for ever, deaf to Ctrl-C
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"{victim}: shard missing: removed after the dataset was built" in out.stdout, out.stdout


# --- the chain over shards: each toggle visible in the op chain --------------------------------------

def _ops(shard_dir, features=FEAT, **toggles):
    pipe = tfpipe.PipelineConfig.optimized(batch_size=4, **toggles)
    return dataset_ops(tfpipe.build_dataset(shard_dir, "train", pipe, features))


def _nested(shard_dir, features=FEAT, **toggles):
    """The dataset ops inside the chain's functions (the order reads its files inside a flat_map)."""
    pipe = tfpipe.PipelineConfig.optimized(batch_size=4, **toggles)
    return {op for n in walk(tfpipe.build_dataset(shard_dir, "train", pipe, features)) for op in n.function_ops}


# The order: a range of epochs, each flat-mapped to its files read in a fixed order (a parallel
# interleave inside) and permuted in windows; windows re-cut into batches (TF's rebatch adds its
# own normalizing map), then what runs on batches. No example crosses tf.data alone.
_OPTIMIZED = ["RangeDataset", "FlatMapDataset", "MapDataset", "RebatchDatasetV2", "ParallelMapDatasetV2",
              "PrefetchDataset", "OptionsDataset"]


def test_block_shards_parse_inside_the_interleave_and_cast_after_batch(corpus, tmp_path):
    _write(corpus, tmp_path / "shards")  # float16 on disk: the only map after batch is the cast to float32
    assert _ops(tmp_path / "shards") == _OPTIMIZED
    assert {"ParallelInterleaveDatasetV4", "RebatchDatasetV2"} <= _nested(tmp_path / "shards")
    # Off the order, whole blocks are shuffled and re-cut, or (shuffle_blocks off) un-blocked and shuffled.
    assert _ops(tmp_path / "shards", shuffle_filenames=False) == [
        "TensorSliceDataset", "RepeatDataset", "ParallelInterleaveDatasetV4", "ShuffleDatasetV3", "MapDataset",
        "RebatchDatasetV2", "ParallelMapDatasetV2", "MapDataset", "RebatchDatasetV2", "ParallelMapDatasetV2",
        "PrefetchDataset", "OptionsDataset"]
    assert _ops(tmp_path / "shards", shuffle_filenames=False, shuffle_blocks=False) == [
        "TensorSliceDataset", "RepeatDataset", "ParallelInterleaveDatasetV4", "MapDataset",
        "UnbatchDataset", "ShuffleDatasetV3", "BatchDatasetV2", "ParallelMapDatasetV2", "PrefetchDataset",
        "OptionsDataset"]


@pytest.mark.parametrize("toggle,expected", [
    ("repeat_before_shuffle", ["TensorSliceDataset", "ShuffleDatasetV3", "ParallelInterleaveDatasetV4",
                               "ShuffleDatasetV3", "BatchDatasetV2", "ParallelMapDatasetV2", "RepeatDataset",
                               "PrefetchDataset", "OptionsDataset"]),
    ("shuffle_filenames", ["TensorSliceDataset", "RepeatDataset", "ParallelInterleaveDatasetV4",
                           "ShuffleDatasetV3", "BatchDatasetV2", "ParallelMapDatasetV2", "PrefetchDataset",
                           "OptionsDataset"]),
    ("parallel_reads", _OPTIMIZED),  # inside the order: its files read one after another (below)
    ("vectorize", ["RangeDataset", "FlatMapDataset", "MapDataset", "UnbatchDataset", "ParallelMapDatasetV2",
                   "BatchDatasetV2", "PrefetchDataset", "OptionsDataset"]),
    ("parallel_map", ["RangeDataset", "FlatMapDataset", "MapDataset", "RebatchDatasetV2", "MapDataset",
                      "PrefetchDataset", "OptionsDataset"]),
    ("prefetch", _OPTIMIZED[:-2] + ["OptionsDataset"]),
])
def test_each_toggle_changes_the_shard_chain(corpus, tmp_path, toggle, expected):
    _write(corpus, tmp_path / "shards", format="tfrecord-example")
    assert _ops(tmp_path / "shards") == _OPTIMIZED
    assert _ops(tmp_path / "shards", **{toggle: False}) == expected
    if toggle == "parallel_reads":
        assert "ParallelInterleaveDatasetV4" in _nested(tmp_path / "shards")
        assert "ParallelInterleaveDatasetV4" not in _nested(tmp_path / "shards", parallel_reads=False)


def test_cache_fuse_maps_and_deterministic_change_the_shard_chain(corpus, tmp_path):
    _write(corpus, tmp_path / "shards", store="waveform", format="tfrecord-example")
    cached = _ops(tmp_path / "shards", cache="memory")
    # A cache replays one epoch: shuffled whole before the repeat, so epochs stay apart.
    assert cached[:5] == ["TensorSliceDataset", "ParallelInterleaveDatasetV4", "CacheDatasetV2", "ShuffleDatasetV3",
                          "RepeatDataset"]
    # Stored waveforms, log-mel asked for: parse and features are one map, or two when not fused.
    assert _ops(tmp_path / "shards").count("ParallelMapDatasetV2") == 1
    assert _ops(tmp_path / "shards", fuse_maps=False).count("ParallelMapDatasetV2") == 2
    for deterministic in (False, True):
        # Off the order, the interleave may hand records over as they come; the order's own
        # interleave always keeps its order (its positions are what resuming counts).
        ds = tfpipe.build_dataset(tmp_path / "shards", "train", tfpipe.PipelineConfig.optimized(
            deterministic=deterministic, shuffle_filenames=False), FEAT)
        graph = tf.compat.v1.GraphDef.FromString(ds._as_serialized_graph().numpy())
        interleave = next(n for n in graph.node if n.op == "ParallelInterleaveDatasetV4")
        assert interleave.attr["deterministic"].s.decode() == str(deterministic).lower()


def test_naive_chain_reads_shards_one_by_one_and_parses_per_example(corpus, tmp_path):
    _write(corpus, tmp_path / "shards", format="tfrecord-example")
    naive = tfpipe.build_dataset(tmp_path / "shards", "train", tfpipe.PipelineConfig.naive(batch_size=4), FEAT)
    assert dataset_ops(naive) == ["TensorSliceDataset", "FlatMapDataset", "ShuffleDatasetV3", "MapDataset",
                                  "BatchDatasetV2", "RepeatDataset", "OptionsDataset"]


def test_class_names_renumber_a_shard_folder_written_from_data_lacking_a_class(tmp_path):
    from tests.support import make_corpus

    held = make_corpus(tmp_path / "eval", classes=("ant", "cat"), per_class=2)
    out = str(tmp_path / "s")
    _write(held, out, num_shards=2)
    names = ("ant", "bee", "cat")
    for pipe in (tfpipe.PipelineConfig.naive(batch_size=8), tfpipe.PipelineConfig.optimized(batch_size=8)):
        (_, labels), = tfpipe.build_dataset(out, "eval", pipe, class_names=names).as_numpy_iterator()
        assert sorted(labels.tolist()) == [0, 0, 2, 2]  # cat is 2, as in the training data
    with pytest.raises(ValueError, match=r"classes 'cat' are not in class_names \('ant', 'bee'\)"):
        tfpipe.find(out, class_names=("ant", "bee"))
