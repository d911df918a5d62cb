"""Shards: pure planner, wav -> shards -> dataset round trip, kill-and-resume, bad inputs, damage, toggles."""

import dataclasses
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import soundfile as sf
import tensorflow as tf

import tfpipe
from tfpipe import compat
from tfpipe.core.graph import dataset_ops
from tfpipe.storage import index as index_lib
from tfpipe.storage.shard_job import PATH_KEY
from tfpipe.storage.verify import verify_shards

from tests.support import make_corpus, start_slow_writer

FEAT = tfpipe.AudioConfig(clip_seconds=0.25)
LOG_MEL_F16_TOL = 0.01  # float16 keeps 11 bits: |log-mel| <= 16 rounds by at most 2**-8


def _write(data, out, **kwargs):
    kwargs = {"num_shards": 3, "num_workers": 0, "features": FEAT, "progress": False, **kwargs}
    return tfpipe.write_shards(data, out, **kwargs)


def _examples(data, features=FEAT, mode="eval", batch_size=5, **kwargs):
    """All (features, labels) of one eval pass, concatenated, plus the batch sizes seen."""
    pipe = tfpipe.PipelineConfig.optimized(batch_size=batch_size)
    xs, ys, sizes = [], [], []
    for x, y in tfpipe.build_dataset(data, mode, pipe, features, **kwargs):
        xs.append(x[features.feature_key].numpy())
        ys.append(y.numpy())
        sizes.append(len(y))
    return np.concatenate(xs), np.concatenate(ys), sizes


def _match(got, want):
    """Index of the nearest `want` row for each `got` row, and the distance to it."""
    dist = np.abs(got[:, None] - want[None]).reshape(len(got), len(want), -1).max(axis=-1)
    return dist.argmin(axis=1), dist.min(axis=1)


def _stored_paths(shard_dir):
    """Every example's source path, read straight from the TFRecord files (one or a block per record)."""
    paths = []
    for f in sorted(glob.glob(os.path.join(shard_dir, "*.tfrecord"))):
        for record in tf.data.TFRecordDataset(f):
            example = tf.train.Example.FromString(record.numpy())
            paths += [p.decode() for p in example.features.feature[PATH_KEY].bytes_list.value]
    return paths


def _relative_wavs(root):
    return sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "*", "*.wav")))


# --- planner (pure, realistic sizes) ------------------------------------------------------

def test_plan_is_deterministic_balanced_mixed_and_exact_at_100k_examples():
    labels = np.repeat([0, 1, 2], [50_000, 30_000, 20_000])
    plan = tfpipe.plan_shards(labels, 128, seed=7)
    assert plan == tfpipe.plan_shards(labels, 128, seed=7)
    assert plan != tfpipe.plan_shards(labels, 128, seed=8)
    assert [s.file for s in plan[:2]] == ["train-00000-of-00128.tfrecord", "train-00001-of-00128.tfrecord"]
    every = np.concatenate([s.examples for s in plan])
    np.testing.assert_array_equal(np.sort(every), np.arange(labels.size))  # each example exactly once
    sizes = [len(s.examples) for s in plan]
    assert max(sizes) - min(sizes) <= 1
    per_class = np.array([np.bincount(labels[list(s.examples)], minlength=3) for s in plan])
    for c, n in enumerate([50_000, 30_000, 20_000]):
        assert set(per_class[:, c]) <= {n // 128, n // 128 + 1}  # every shard holds every class
    first = labels[list(plan[0].examples)]
    assert (np.diff(first) != 0).sum() > len(first) // 3  # records inside a shard are mixed, not sorted


def test_plan_rejects_more_shards_than_examples():
    with pytest.raises(ValueError, match=r"num_shards=5 for 4 examples.*--num_shards"):
        tfpipe.plan_shards([0, 0, 1, 1], 5)


# --- round trip -----------------------------------------------------------------------------

@pytest.mark.parametrize("store,dtype,output,tol", [
    ("log_mel", "float16", "log_mel", LOG_MEL_F16_TOL),
    ("waveform", "float32", "log_mel", 1e-3),
    ("waveform", "float16", "waveform", 2e-4),
])
def test_round_trip_equals_online_features_every_example_once(corpus, tmp_path, store, dtype, output, tol):
    features = dataclasses.replace(FEAT, output=output)
    index = _write(corpus, tmp_path / "shards", store=store, dtype=dtype, features=features)
    assert index["num_examples"] == 12 and index["rejected"] == []
    assert index["domain"]["config"] == dataclasses.asdict(features) and index["domain"]["store"] == store
    assert index["features"][store] == {"dtype": dtype, "shape": list(dataclasses.replace(features, output=store)
                                                                      .feature_shape)}
    got, got_labels, sizes = _examples(tmp_path / "shards", features)
    want, want_labels, _ = _examples(corpus, features)
    assert sizes == [5, 5, 2]  # eval: one pass, last partial batch kept
    nearest, dist = _match(got, want)
    assert sorted(nearest) == list(range(12))  # a bijection: every online example exactly once
    assert dist.max() < tol
    np.testing.assert_array_equal(got_labels, want_labels[nearest])
    assert sorted(_stored_paths(tmp_path / "shards")) == _relative_wavs(corpus)


def test_shards_split_across_input_pipelines_cover_everything_once(corpus, tmp_path):
    _write(corpus, tmp_path / "shards")
    parts = [_examples(tmp_path / "shards", input_context=tf.distribute.InputContext(2, i))[0]
             for i in (0, 1)]
    assert len(parts[0]) + len(parts[1]) == 12
    nearest, _ = _match(np.concatenate(parts), _examples(corpus)[0])
    assert sorted(nearest) == list(range(12))


def test_train_mode_is_endless_and_float32(corpus, tmp_path):
    _write(corpus, tmp_path / "shards")
    pipe = tfpipe.PipelineConfig.optimized(batch_size=5, seed=1)
    ds = tfpipe.build_dataset(tmp_path / "shards", "train", pipe, FEAT)
    batches = list(ds.take(10))  # 50 examples from 12: repeats
    assert len(batches) == 10
    assert batches[0][0]["log_mel"].dtype == tf.float32 and batches[0][1].dtype == tf.int64
    assert batches[0][0]["log_mel"].shape == (5, FEAT.num_frames, FEAT.n_mels)


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


# --- kill and resume ---------------------------------------------------------------------------

def _start_slow_writer(corpus, out, fmt="tfrecord-block", seed=0):
    return start_slow_writer(corpus, out, sleep=0.4, num_shards=6, fmt=fmt, seed=seed, stderr=subprocess.PIPE)


def _kill_after_first_shard(proc, out):
    """SIGKILLs the writer once shard 0 is whole and shard 1 is half-written."""
    manifest = out / ".tfpipe-work" / "train-00000-of-00006.tfrecord.json"
    half = str(out / ".tfpipe-work" / "train-00001-*.tmp-*")
    deadline = time.time() + 90
    while not (manifest.exists() and glob.glob(half)):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.time() < deadline, "the writer never finished its first shard"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # mid-way through shard 1
    proc.wait()


@pytest.mark.parametrize("fmt", ["tfrecord-block", "tfrecord-example"])
def test_killed_run_leaves_no_half_shard_and_rerun_ends_identical(tmp_path, fmt):
    corpus = make_corpus(tmp_path / "corpus", per_class=8)
    reference = _write(corpus, tmp_path / "reference", num_shards=6, format=fmt)
    out = tmp_path / "out"
    proc = _start_slow_writer(corpus, out, fmt)
    _kill_after_first_shard(proc, out)
    assert not (out / "tfpipe.json").exists()
    by_file = {s["file"]: s["sha256"] for s in reference["shards"]}
    shard_files = glob.glob(str(out / "train-*"))  # the reader's glob: shards only, every one whole
    assert [os.path.basename(p) for p in shard_files] == ["train-00000-of-00006.tfrecord"]
    for path in shard_files:
        assert index_lib.sha256_file(path) == by_file[os.path.basename(path)]
    first = out / "train-00000-of-00006.tfrecord"
    before = os.stat(first)

    resumed = _write(corpus, out, num_shards=6, num_workers=2, format=fmt)  # the same command, 2 processes
    assert resumed == reference
    assert json.loads((out / "tfpipe.json").read_text()) == reference
    after = os.stat(first)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not rewritten
    assert sorted(os.listdir(out)) == sorted([s["file"] for s in reference["shards"]] + ["tfpipe.json"])
    assert [c.problem for c in verify_shards(str(out))] == [""] * 6


def test_interrupted_rerun_with_another_seed_never_reads_wrong_data(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", per_class=8)
    out = tmp_path / "out"
    _write(corpus, out, num_shards=6)
    proc = _start_slow_writer(corpus, out, seed=1)  # another plan: shards are replaced one by one
    _kill_after_first_shard(proc, out)
    # The old index went before the first new shard: the folder is not a shard folder until rerun.
    assert not (out / "tfpipe.json").exists()
    with pytest.raises(tfpipe.DataError, match=r"an unfinished tfpipe prepare .*rerun the same prepare command"):
        tfpipe.build_dataset(out, "eval", None, FEAT)
    rerun = _write(corpus, out, num_shards=6, seed=1)
    assert rerun == _write(corpus, tmp_path / "reference", num_shards=6, seed=1)
    assert sorted(_stored_paths(out)) == _relative_wavs(corpus)  # every clip exactly once


# --- inputs of every kind ------------------------------------------------------------------

def _sine(path, rate=16000, subtype="PCM_16", channels=1, seconds=0.3):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    t = np.arange(int(seconds * rate)) / rate
    wave = (0.4 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    sf.write(path, np.stack([wave] * channels, axis=1) if channels > 1 else wave, rate, subtype=subtype)
    return path


def _bad_file(path, kind):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if kind == "truncated":
        data = open(_sine(path), "rb").read()
        open(path, "wb").write(data[:len(data) // 2])
    elif kind == "header_only":
        data = open(_sine(path), "rb").read()
        open(path, "wb").write(data[:30])
    elif kind == "empty":
        open(path, "wb").close()
    elif kind == "no_samples":
        sf.write(path, np.zeros(0, np.float32), 16000, subtype="PCM_16")
    elif kind == "not_audio":
        open(path, "w").write("this is a text file, not audio\n" * 20)
    return path


_ACCEPTED = {"pcm24": dict(subtype="PCM_24"), "pcm32": dict(subtype="PCM_32"), "float": dict(subtype="FLOAT"),
             "pcm8": dict(subtype="PCM_U8"), "stereo": dict(channels=2), "rate44k": dict(rate=44100)}
_REJECTED = {"truncated": "truncated", "header_only": "not readable audio", "empty": "empty file",
             "no_samples": "empty: no samples", "not_audio": "not readable audio"}


def test_any_wav_format_is_accepted_offline_and_decoded_alike(tmp_path):
    root = tmp_path / "formats"
    _sine(str(root / "ref" / "pcm16.wav"))
    for name, kwargs in _ACCEPTED.items():
        _sine(str(root / "other" / f"{name}.wav"), **kwargs)
    out = tmp_path / "shards"
    index = _write(root, out, num_shards=1, store="waveform", dtype="float32", format="tfrecord-example",
                   features=dataclasses.replace(FEAT, output="waveform"))
    assert index["num_examples"] == 1 + len(_ACCEPTED) and index["rejected"] == []
    records = {}
    for record in tf.data.TFRecordDataset(str(out / index["shards"][0]["file"])):
        feature = tf.train.Example.FromString(record.numpy()).features.feature
        wave = np.frombuffer(feature["waveform"].bytes_list.value[0], "<f4")
        records[os.path.basename(feature["path"].bytes_list.value[0].decode())[:-4]] = wave
    assert records["pcm16"].shape == (FEAT.num_samples,)
    for name, tol in [("pcm24", 1e-4), ("pcm32", 1e-4), ("float", 1e-4), ("stereo", 1e-4), ("pcm8", 1e-2)]:
        np.testing.assert_allclose(records[name], records["pcm16"], atol=tol, err_msg=name)
    # Resampled 44.1 kHz -> 16 kHz: equal once the resampler's start-up transient is past.
    np.testing.assert_allclose(records["rate44k"][100:], records["pcm16"][100:], atol=1e-3)


@pytest.mark.parametrize("kind", sorted(_REJECTED))
def test_bad_file_fails_naming_it_by_default(tmp_path, kind):
    root = tmp_path / "data"
    _sine(str(root / "a" / "good.wav"))
    bad = _bad_file(str(root / "b" / f"{kind}.wav"), kind)
    with pytest.raises(tfpipe.DataError, match=rf"(?s)nothing was written.*{re.escape(bad)}: {_REJECTED[kind]}.*--on_error=skip"):
        _write(root, tmp_path / "shards", num_shards=1)
    assert not os.path.exists(tmp_path / "shards" / "tfpipe.json")
    assert not os.path.exists(tmp_path / "shards")  # nothing is left, not even the folder


def test_every_bad_file_is_listed_with_its_reason_before_anything_is_written(tmp_path):
    root = tmp_path / "data"
    for i in range(4):
        _sine(str(root / "a" / f"good{i}.wav"))
    bad = {kind: _bad_file(str(root / "b" / f"{kind}.wav"), kind) for kind in _REJECTED}
    os.symlink(str(root / "nowhere.wav"), str(root / "b" / "broken_link.wav"))
    os.symlink("loop.wav", str(root / "b" / "loop.wav"))
    with pytest.raises(tfpipe.DataError) as raised:
        _write(root, tmp_path / "shards", num_shards=2, num_workers=2)
    message = str(raised.value)
    assert message.startswith("7 of 11 input files cannot be used; nothing was written")
    for kind, path in bad.items():
        assert f"{path}: {_REJECTED[kind]}" in message
    assert "broken_link.wav: " in message and "loop.wav: " in message
    assert not os.path.exists(tmp_path / "shards")
    # --on_error=skip: the same files are listed in the index with the same reasons; links included.
    index = _write(root, tmp_path / "shards", num_shards=2, on_error="skip")
    assert index["num_examples"] == 4 and len(index["rejected"]) == 7


def test_bad_files_are_skipped_and_listed_and_counts_add_up(tmp_path):
    root = tmp_path / "data"
    for i in range(3):
        _sine(str(root / "a" / f"good{i}.wav"))
        _sine(str(root / "b" / f"good{i}.wav"), rate=22050)
    for kind in _REJECTED:
        _bad_file(str(root / "b" / f"{kind}.wav"), kind)
    index = _write(root, tmp_path / "shards", num_shards=2, on_error="skip")
    found = len(_relative_wavs(root))
    assert index["num_examples"] == 6 and found == index["num_examples"] + len(index["rejected"])
    reasons = {r["path"]: r["reason"] for r in index["rejected"]}
    assert reasons.keys() == {f"b/{kind}.wav" for kind in _REJECTED}
    for kind, why in _REJECTED.items():
        assert reasons[f"b/{kind}.wav"].startswith(why.split(": ")[0])
    assert sorted(_stored_paths(tmp_path / "shards")) == [p for p in _relative_wavs(root) if "good" in p]


# --- damage ---------------------------------------------------------------------------------

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "tfpipe.cli", *args], capture_output=True, text=True,
                          timeout=120)


def test_cli_prepare_then_inspect_verify_names_a_corrupted_shard(corpus, tmp_path):
    out = str(tmp_path / "shards")
    done = _cli("prepare", "--input", corpus, "--output", out, "--num_shards", "3", "--workers", "0",
                "--clip_seconds", "0.25")
    assert done.returncode == 0, done.stderr
    assert "found 12 = written 12 + rejected 0" in done.stdout and "examples/s" in done.stdout
    victim = os.path.join(out, json.loads(open(os.path.join(out, "tfpipe.json")).read())["shards"][1]["file"])
    with open(victim, "r+b") as f:  # flip one byte in the middle: same size, bad CRC
        f.seek(f.seek(0, os.SEEK_END) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    plain = _cli("inspect", out)
    assert plain.returncode == 0, plain.stderr  # sizes still match: only --verify reads the bytes
    for line in ("a             4", "train-00000-of-00003.tfrecord", "format        tfrecord-block (version 2)",
                 "log_mel float16 [26, 64], path bytes []", "audio, stores log_mel (read as log_mel float32 [26, 64])",
                 "converted     none"):
        assert line in plain.stdout
    verified = _cli("inspect", out, "--verify")
    assert verified.returncode == 1
    assert "train-00001-of-00003.tfrecord: sha256 differs" in verified.stderr
    assert "train-00000-of-00003.tfrecord" not in verified.stderr

    # Reading it: the CRC error is turned into one that names the shard.
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"train-00001-of-00003.tfrecord: damaged shard"):
        _examples(out)


def test_shard_with_wrong_size_fails_when_the_dataset_is_built(corpus, tmp_path):
    out = tmp_path / "shards"
    index = _write(corpus, out)
    victim = out / index["shards"][2]["file"]
    with open(victim, "r+b") as f:
        f.truncate(victim.stat().st_size - 100)
    damaged = rf"{re.escape(str(victim))}: damaged shard: \d+ bytes on disk but .* lists"
    with pytest.raises(tfpipe.DataError, match=damaged):
        tfpipe.build_dataset(out, "train", None, FEAT)


# --- several hosts: retired for Beam ----------------------------------------------------------

def test_hand_run_multi_host_mode_is_retired_with_the_beam_replacement_named(corpus, tmp_path):
    with pytest.raises(ValueError, match=r"multi-host mode is retired.*runner='beam'"):
        _write(corpus, tmp_path / "multi", num_shards=4, worker_index=1, num_hosts=2)
    with pytest.raises(tfpipe.DataError, match=r"retired.*--runner=beam"):
        compat.merge_index(str(tmp_path / "multi"))
    done = _cli("prepare", "--input", corpus, "--output", str(tmp_path / "m"), "--num_hosts", "2")
    assert done.returncode == 1 and "--runner=beam" in done.stderr and "Traceback" not in done.stderr


# --- toggles (v1 records: parse is the map after batch; v2 blocks are parsed inside the interleave) ------

def test_block_shards_parse_inside_the_interleave_and_cast_after_batch(corpus, tmp_path):
    _write(corpus, tmp_path / "shards")  # float16 on disk: the only map after batch is the cast to float32
    # Whole blocks cross the interleave's threads, are shuffled whole, permuted per window and re-cut
    # into batches (rebatch: TF's own normalizing map + Rebatch); no example crosses tf.data alone.
    assert _ops(tmp_path / "shards") == ["TensorSliceDataset", "RepeatDataset", "ShuffleDatasetV3",
                                         "ParallelInterleaveDatasetV4", "ShuffleDatasetV3", "MapDataset",
                                         "RebatchDatasetV2", "ParallelMapDatasetV2", "MapDataset",
                                         "RebatchDatasetV2", "ParallelMapDatasetV2", "PrefetchDataset",
                                         "OptionsDataset"]
    # The example-level shuffle is the toggle's off side: unbatch after the interleave, then a buffer.
    assert _ops(tmp_path / "shards", shuffle_blocks=False) == [
        "TensorSliceDataset", "RepeatDataset", "ShuffleDatasetV3", "ParallelInterleaveDatasetV4", "MapDataset",
        "UnbatchDataset", "ShuffleDatasetV3", "BatchDatasetV2", "ParallelMapDatasetV2", "PrefetchDataset",
        "OptionsDataset"]


def _ops(shard_dir, features=FEAT, **toggles):
    pipe = tfpipe.PipelineConfig.optimized(batch_size=4, **toggles)
    return dataset_ops(tfpipe.build_dataset(shard_dir, "train", pipe, features))


_OPTIMIZED = ["TensorSliceDataset", "RepeatDataset", "ShuffleDatasetV3", "ParallelInterleaveDatasetV4",
              "ShuffleDatasetV3", "BatchDatasetV2", "ParallelMapDatasetV2", "PrefetchDataset",
              "OptionsDataset"]


@pytest.mark.parametrize("toggle,expected", [
    ("repeat_before_shuffle", ["TensorSliceDataset", "ShuffleDatasetV3", "ParallelInterleaveDatasetV4",
                               "ShuffleDatasetV3", "BatchDatasetV2", "ParallelMapDatasetV2", "RepeatDataset",
                               "PrefetchDataset", "OptionsDataset"]),
    ("shuffle_filenames", ["TensorSliceDataset", "RepeatDataset", "ParallelInterleaveDatasetV4",
                           "ShuffleDatasetV3", "BatchDatasetV2", "ParallelMapDatasetV2", "PrefetchDataset",
                           "OptionsDataset"]),
    ("parallel_reads", ["TensorSliceDataset", "RepeatDataset", "ShuffleDatasetV3", "FlatMapDataset",
                        "ShuffleDatasetV3", "BatchDatasetV2", "ParallelMapDatasetV2", "PrefetchDataset",
                        "OptionsDataset"]),
    ("vectorize", ["TensorSliceDataset", "RepeatDataset", "ShuffleDatasetV3", "ParallelInterleaveDatasetV4",
                   "ShuffleDatasetV3", "ParallelMapDatasetV2", "BatchDatasetV2", "PrefetchDataset",
                   "OptionsDataset"]),
    ("parallel_map", ["TensorSliceDataset", "RepeatDataset", "ShuffleDatasetV3",
                      "ParallelInterleaveDatasetV4", "ShuffleDatasetV3", "BatchDatasetV2", "MapDataset",
                      "PrefetchDataset", "OptionsDataset"]),
    ("prefetch", _OPTIMIZED[:-2] + ["OptionsDataset"]),
])
def test_each_toggle_changes_the_shard_chain(corpus, tmp_path, toggle, expected):
    _write(corpus, tmp_path / "shards", format="tfrecord-example")
    assert _ops(tmp_path / "shards") == _OPTIMIZED
    assert _ops(tmp_path / "shards", **{toggle: False}) == expected


def test_cache_fuse_maps_and_deterministic_change_the_shard_chain(corpus, tmp_path):
    _write(corpus, tmp_path / "shards", store="waveform", format="tfrecord-example")
    cached = _ops(tmp_path / "shards", cache="memory")
    assert cached[:4] == ["TensorSliceDataset", "ParallelInterleaveDatasetV4", "CacheDatasetV2",
                          "RepeatDataset"]
    # Stored waveforms, log-mel asked for: parse and features are one map, or two when not fused.
    assert _ops(tmp_path / "shards").count("ParallelMapDatasetV2") == 1
    assert _ops(tmp_path / "shards", fuse_maps=False).count("ParallelMapDatasetV2") == 2
    for deterministic in (False, True):
        ds = tfpipe.build_dataset(tmp_path / "shards", "train",
                                  tfpipe.PipelineConfig.optimized(deterministic=deterministic), FEAT)
        graph = tf.compat.v1.GraphDef.FromString(ds._as_serialized_graph().numpy())
        interleave = next(n for n in graph.node if n.op == "ParallelInterleaveDatasetV4")
        assert interleave.attr["deterministic"].s.decode() == str(deterministic).lower()


def test_naive_chain_reads_shards_one_by_one_and_parses_per_example(corpus, tmp_path):
    _write(corpus, tmp_path / "shards", format="tfrecord-example")
    naive = tfpipe.build_dataset(tmp_path / "shards", "train", tfpipe.PipelineConfig.naive(batch_size=4), FEAT)
    assert dataset_ops(naive) == ["TensorSliceDataset", "FlatMapDataset", "ShuffleDatasetV3", "MapDataset",
                                  "BatchDatasetV2", "RepeatDataset", "OptionsDataset"]
