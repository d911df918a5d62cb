"""storage/writer.py: write_shards of your examples (any schema, variable length) or a domain's files, into a
clean folder; what it refuses (other settings, an output it cannot write, a full disk) and how it says so."""

import contextlib
import dataclasses
import glob
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import soundfile as sf
import tensorflow as tf

import tfpipe
from tfpipe.storage import verify

from tests.support import make_corpus, write_tone

FEAT = tfpipe.AudioConfig(clip_seconds=0.25)
FORMATS = ["tfrecord-block", "tfrecord-example"]
LOG_MEL_F16_TOL = 0.01  # float16 keeps 11 bits: |log-mel| <= 16 rounds by at most 2**-8
_DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
           "uint64", "bool"]


def _write(data, out, **kwargs):
    kwargs = {"num_shards": 3, "num_workers": 0, "features": FEAT, "progress": False, **kwargs}
    return tfpipe.write_shards(data, out, **kwargs)


def _user_examples(n=10):
    rng = np.random.default_rng(0)
    examples = []
    for i in range(n):
        example = {f"a_{d}": (rng.standard_normal((2, 3)) * 50).astype(d) for d in _DTYPES}
        example.update({"id": i, "scalar": np.float32(i / 2), "vector": np.arange(4, dtype=np.int16) * i,
                        "blob": bytes([i, 0, 255]) * (i + 1), "text": f"example {i} ü",
                        "words": np.array([f"w{i}", "x", ""], dtype=object), "flag": bool(i % 2),
                        "label": i % 3})
        examples.append(example)
    return examples


def _all(ds):
    """Every (features, labels) batch of a dataset, concatenated per key."""
    xs, ys = {}, []
    for x, y in ds:
        for k, v in x.items():
            xs.setdefault(k, []).append(v.numpy())
        ys.append(y.numpy())
    return {k: np.concatenate(v) for k, v in xs.items()}, np.concatenate(ys)


# --- your examples: any schema -----------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_any_dtype_and_shape_round_trips_with_the_same_keys_dtypes_and_shapes(tmp_path, fmt):
    examples = _user_examples()
    index = tfpipe.write_shards(examples, tmp_path / "s", num_shards=3, format=fmt, progress=False)
    assert index["format"] == fmt and index["domain"] is None and index["class_names"] == ["0", "1", "2"]
    assert index["features"]["a_uint64"] == {"dtype": "uint64", "shape": [2, 3]}
    assert index["features"]["text"] == {"dtype": "str", "shape": []}
    ds = tfpipe.build_dataset(tmp_path / "s", "eval", tfpipe.PipelineConfig.optimized(batch_size=4))
    spec = ds.element_spec[0]
    for d in _DTYPES:
        assert spec[f"a_{d}"].dtype == tf.as_dtype(d) and spec[f"a_{d}"].shape.as_list() == [None, 2, 3]
    assert spec["id"].dtype == tf.int64 and spec["scalar"].dtype == tf.float32 and spec["flag"].dtype == tf.bool
    assert spec["words"].shape.as_list() == [None, 3] and spec["blob"].dtype == tf.string
    got, labels = _all(ds)
    order = np.argsort(got["id"])
    assert got["id"][order].tolist() == list(range(10))  # every example exactly once
    for i, row in enumerate(order):
        want = examples[i]
        for d in _DTYPES:
            np.testing.assert_array_equal(got[f"a_{d}"][row], want[f"a_{d}"], err_msg=d)
        assert got["blob"][row] == want["blob"] and got["text"][row].decode() == want["text"]
        assert [w.decode() for w in got["words"][row]] == list(want["words"])
        np.testing.assert_array_equal(got["vector"][row], want["vector"])
        assert got["scalar"][row] == want["scalar"] and got["flag"][row] == want["flag"]
        assert labels[row] == want["label"]
    assert all(c.problem == "" for c in tfpipe.verify_shards(str(tmp_path / "s")))


def test_string_labels_become_sorted_class_names_and_a_given_schema_is_used(tmp_path):
    examples = [{"x": [i, i + 1], "label": ["dog", "cat"][i % 2]} for i in range(6)]
    index = tfpipe.write_shards(examples, tmp_path / "s", num_shards=2, schema={"x": ("int32", (2,))},
                                progress=False)
    assert index["class_names"] == ["cat", "dog"] and index["features"] == {"x": {"dtype": "int32", "shape": [2]}}
    got, labels = _all(tfpipe.build_dataset(tmp_path / "s", "eval"))
    assert got["x"].dtype == np.int32
    assert sorted(zip(got["x"][:, 0].tolist(), labels.tolist())) == [(i, 1 - i % 2) for i in range(6)]


def test_an_example_that_does_not_fit_the_schema_is_named_and_nothing_is_written(tmp_path):
    examples = [{"x": np.zeros((2, 3), np.float32), "label": 0} for _ in range(5)]
    examples[3] = {"x": np.zeros((3, 2), np.float32), "label": 1}
    with pytest.raises(tfpipe.DataError, match=r"example 3, key 'x': expected float32 \[2, 3\] \(the schema\), "
                                               r"got float32 \[3, 2\]"):
        tfpipe.write_shards(examples, tmp_path / "s", num_shards=2, progress=False)
    examples[3] = {"x": np.zeros((2, 3), np.float64), "label": 1}
    with pytest.raises(tfpipe.DataError, match=r"example 3, key 'x': expected float32 .* got float64"):
        tfpipe.write_shards(examples, tmp_path / "s", num_shards=2, progress=False)
    examples[3] = {"y": np.zeros((2, 3), np.float32), "label": 1}
    with pytest.raises(tfpipe.DataError, match=r"example 3: keys differ.*missing \['x'\].*extra \['y'\]"):
        tfpipe.write_shards(examples, tmp_path / "s", num_shards=2, progress=False)
    assert not os.path.exists(tmp_path / "s")


# --- variable length ---------------------------------------------------------------------------

def _token_examples(n=30):
    lengths = np.random.default_rng(1).integers(1, 40, n)
    return [{"tokens": np.arange(k) + 1000 * i, "frames": np.full((k, 2), i, np.float32), "id": i,
             "label": i % 3} for i, k in enumerate(lengths)]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("preset", ["optimized", "naive"])
def test_variable_length_examples_round_trip_each_once_with_its_exact_values(tmp_path, fmt, preset):
    examples = _token_examples()
    index = tfpipe.write_shards(examples, tmp_path / "s", num_shards=3, format=fmt, progress=False)
    assert index["features"]["tokens"] == {"dtype": "int64", "shape": [None]}  # the schema says it varies
    assert index["features"]["frames"] == {"dtype": "float32", "shape": [None, 2]}
    assert verify.verify_folder(str(tmp_path / "s")).ok
    pipe = tfpipe.PipelineConfig.preset(preset, batch_size=4)
    ds = tfpipe.build_dataset(tmp_path / "s", "eval", pipe)
    assert ds.element_spec[0]["tokens"].shape.as_list() == [None, None]
    seen = []
    for features, labels in ds.as_numpy_iterator():  # padded within each batch to its longest
        for tokens, frames, i, label in zip(features["tokens"], features["frames"], features["id"], labels):
            k = len(examples[i]["tokens"])
            np.testing.assert_array_equal(tokens[:k], examples[i]["tokens"])
            assert not tokens[k:].any() and not frames[k:].any() and (frames[:k] == i).all() and label == i % 3
            seen.append(int(i))
    assert sorted(seen) == list(range(len(examples)))  # every example exactly once
    one = tfpipe.build_dataset(tmp_path / "s", "eval", tfpipe.PipelineConfig.optimized(batch_size=1))
    assert {int(f["id"][0]): f["tokens"].shape[1] for f, _ in one} == {
        e["id"]: len(e["tokens"]) for e in examples}  # alone, an example keeps its own length


def test_a_schema_may_give_the_varying_dimension_and_one_that_does_not_says_how(tmp_path):
    examples = _token_examples(6)
    index = tfpipe.write_shards([{"tokens": e["tokens"], "label": e["label"]} for e in examples], tmp_path / "s",
                                num_shards=2, schema={"tokens": ("int64", (None,))}, progress=False)
    assert index["features"] == {"tokens": {"dtype": "int64", "shape": [None]}}
    with pytest.raises(tfpipe.DataError, match=r"key 'tokens': expected int64 \[\d+\] \(the schema\), got int64 "
                                               r"\[\d+\]; for a first dimension that varies put None there"):
        tfpipe.write_shards(examples, tmp_path / "t", schema={"tokens": ("int64", (len(examples[0]["tokens"]),)),
                                                              "frames": ("float32", (None, 2)), "id": ("int64", ())},
                            progress=False)


# --- a domain's files ----------------------------------------------------------------------------

def _examples(data, features=FEAT, batch_size=5):
    """All features and labels of one eval pass, concatenated, plus the batch sizes seen."""
    pipe = tfpipe.PipelineConfig.optimized(batch_size=batch_size)
    xs, ys, sizes = [], [], []
    for x, y in tfpipe.build_dataset(data, "eval", pipe, features):
        xs.append(x[features.feature_key].numpy())
        ys.append(y.numpy())
        sizes.append(len(y))
    return np.concatenate(xs), np.concatenate(ys), sizes


def _match(got, want):
    """Index of the nearest `want` row for each `got` row, and the distance to it."""
    dist = np.abs(got[:, None] - want[None]).reshape(len(got), len(want), -1).max(axis=-1)
    return dist.argmin(axis=1), dist.min(axis=1)


def stored_paths(shard_dir):
    """Every example's source path (bytes), read straight from the TFRecord files."""
    paths = []
    for f in sorted(glob.glob(os.path.join(shard_dir, "*.tfrecord"))):
        for record in tf.data.TFRecordDataset(f):
            paths += tf.train.Example.FromString(record.numpy()).features.feature["path"].bytes_list.value
    return paths


def _relative_wavs(root):
    return sorted(os.path.relpath(p, root).encode() for p in glob.glob(os.path.join(root, "*", "*.wav")))


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
    assert sorted(stored_paths(tmp_path / "shards")) == _relative_wavs(corpus)


def _sine(path, rate=16000, subtype="PCM_16", channels=1, seconds=0.3):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    t = np.arange(int(seconds * rate)) / rate
    wave = (0.4 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    sf.write(path, np.stack([wave] * channels, axis=1) if channels > 1 else wave, rate, subtype=subtype)
    return path


_ACCEPTED = {"pcm24": dict(subtype="PCM_24"), "pcm32": dict(subtype="PCM_32"), "float": dict(subtype="FLOAT"),
             "pcm8": dict(subtype="PCM_U8"), "stereo": dict(channels=2), "rate44k": dict(rate=44100)}


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


# --- the folder: clean, one split, other settings only with overwrite -----------------------------

def test_a_complete_folder_holds_shards_and_index_only_and_a_plain_glob_reads_it(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    out = tmp_path / "s"
    _write(corpus, out, num_shards=4)
    index = _write(corpus, out, num_shards=3, overwrite=True)
    assert sorted(os.listdir(out)) == sorted([s["file"] for s in index["shards"]] + ["tfpipe.json"])
    files = tf.io.gfile.glob(str(out / "train-*"))  # what a new user does: the old 4 shards are gone
    examples = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(files)]
    assert sum(len(e.features.feature["label"].int64_list.value) for e in examples) == 12


def test_the_same_command_on_a_complete_folder_reads_and_writes_nothing(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", per_class=2)
    first, _ = tfpipe.storage.write_shards_with_stats(corpus, tmp_path / "s", features=FEAT, progress=False)
    index, stats = tfpipe.storage.write_shards_with_stats(corpus, tmp_path / "s", features=FEAT, progress=False)
    assert stats.complete and stats.processed == 0 and index == first


def test_a_folder_holds_one_split_and_another_is_refused(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    _write(corpus, tmp_path / "s", num_shards=2)
    with pytest.raises(tfpipe.DataError, match=r"holds split train shards.*writes split 'eval'.*own folder"):
        _write(corpus, tmp_path / "s", num_shards=2, split="eval")
    assert tfpipe.build_dataset(tmp_path / "s", "eval", None, FEAT) is not None  # untouched


def test_a_complete_folder_of_other_settings_is_replaced_only_with_overwrite(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    out = tmp_path / "s"
    first = _write(corpus, out, num_shards=2)
    other = dataclasses.replace(FEAT, n_mels=32)
    with pytest.raises(tfpipe.DataError, match=r"s: a complete shard folder written with other settings \(.*n_mels: "
                                               r"64 -> 32.*\).*pass --overwrite \(overwrite=True\)"):
        _write(corpus, out, num_shards=2, features=other)
    assert json.loads((out / "tfpipe.json").read_text()) == first  # untouched
    with pytest.raises(tfpipe.DataError, match=r"other settings \(num_shards: 2 -> 3; seed: 0 -> 1\)"):
        _write(corpus, out, num_shards=3, seed=1)
    replaced = _write(corpus, out, num_shards=2, features=other, overwrite=True)
    assert replaced["domain"]["config"]["n_mels"] == 32
    write_tone(str(tmp_path / "corpus" / "a" / "new.wav"), 999)  # the same settings, one more input: updated
    assert _write(corpus, out, num_shards=2, features=other)["num_examples"] == 13


def test_a_complete_folder_written_from_other_data_is_replaced_only_with_overwrite(tmp_path):
    # Issue 32: another --input with the same settings silently replaced 2,000 examples of 10 classes.
    out = tmp_path / "s"
    first = _write(make_corpus(tmp_path / "big", classes=("a", "b", "c", "d"), per_class=3), out, num_shards=2)
    small = make_corpus(tmp_path / "small", classes=("a", "b", "c", "d"), per_class=1)
    with pytest.raises(tfpipe.DataError, match=r"s: a complete shard folder written from other data \(input: "
                                               r".*big -> .*small\); replacing it would discard it: pass "
                                               r"--overwrite"):
        _write(small, out, num_shards=2)
    assert json.loads((out / "tfpipe.json").read_text()) == first  # untouched
    write_tone(str(tmp_path / "big" / "e" / "e0.wav"), 999)  # the same input, a class more
    with pytest.raises(tfpipe.DataError, match=r"from other data \(classes: 4 \[a, b, c, d\] -> 5 \[a, b, c, d, e\]\)"):
        _write(str(tmp_path / "big"), out, num_shards=2)
    assert _write(small, out, num_shards=2, overwrite=True)["num_examples"] == 4


@contextlib.contextmanager
def read_only(folder):
    """`folder` made unwritable, also for root (chattr +i where chmod does not stop it)."""
    os.makedirs(folder, exist_ok=True)
    os.chmod(folder, 0o555)
    immutable = os.access(folder, os.W_OK)  # root ignores the mode
    if immutable and subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode:
        pytest.skip("cannot make a folder read-only here (root, no chattr)")
    try:
        yield str(folder)
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        os.chmod(folder, 0o755)


def test_an_output_that_cannot_be_a_writable_folder_is_named_with_the_fix(tmp_path):
    examples = [{"x": i, "label": 0} for i in range(4)]
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(tfpipe.DataError, match=rf"{tmp_path}/file: exists and is not a folder"):
        tfpipe.write_shards(examples, tmp_path / "file", progress=False)
    with pytest.raises(tfpipe.DataError, match=rf"{tmp_path}/file/s: {tmp_path}/file is a file, not a folder"):
        tfpipe.write_shards(examples, tmp_path / "file" / "s", progress=False)
    with read_only(tmp_path / "ro") as ro:
        with pytest.raises(tfpipe.DataError, match=rf"{ro}/s: cannot write in {ro} \(permission denied\)"):
            tfpipe.write_shards(examples, os.path.join(ro, "s"), progress=False)


# --- a full disk ---------------------------------------------------------------------------------

_FSIZE_WRITER = textwrap.dedent("""
    import resource, signal, sys
    import numpy as np
    import tfpipe
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over the limit: write() fails with EFBIG instead
    limit = int(sys.argv[2])
    if limit:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    examples = [{"x": np.zeros(0, np.float32), "label": i} for i in range(200)]
    try:
        tfpipe.write_shards(examples, sys.argv[1], num_shards=4, progress=False)
    except tfpipe.DataError as e:
        sys.exit(f"DataError: {e}")
""")


@pytest.mark.parametrize("what", ["shard", "index"])
def test_a_full_disk_is_a_clear_error_and_leaves_no_temp_file(tmp_path, what):
    probe = subprocess.run([sys.executable, "-c", _FSIZE_WRITER, str(tmp_path / "probe"), "0"],
                           capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    shard = max(os.path.getsize(p) for p in glob.glob(str(tmp_path / "probe" / "*.tfrecord")))
    index = os.path.getsize(tmp_path / "probe" / "tfpipe.json")
    assert index > 2 * shard  # so a limit between them stops the index but not the shards
    limit = shard // 2 if what == "shard" else (shard + index) // 2
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-c", _FSIZE_WRITER, str(out), str(limit)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "the disk is full or the file size limit was reached" in done.stderr
    assert ("train-00000-of-00004.tfrecord" if what == "shard" else "tfpipe.json") in done.stderr
    assert not (out / "tfpipe.json").exists()
    leftovers = [p for p in glob.glob(str(out / "**" / "*"), recursive=True) + glob.glob(str(out / ".*" / "*"))
                 if ".tmp-" in p]
    assert leftovers == []
