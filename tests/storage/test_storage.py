"""Storage v2: any schema round trip, v1/v2 formats, a clean folder, safety under reruns, verify."""

import dataclasses
import glob
import json
import os
import re
import resource
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.domains.audio import offline
from tfpipe.storage import verify
from tfpipe.storage.index import sha256_file

from tests.support import make_corpus, start_slow_writer

FEAT = tfpipe.AudioConfig(clip_seconds=0.25)
FORMATS = ["tfrecord-block", "tfrecord-example"]
_DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
           "uint64", "bool"]


def _cli(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "tfpipe.cli", *args], capture_output=True, text=True,
                          timeout=120, **kwargs)


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


# --- any schema ---------------------------------------------------------------------------------

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


# --- formats: v2 blocks equal v1 records; v1 folders of earlier versions still read -------------------

def test_block_shards_read_the_same_examples_as_one_example_records(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", per_class=6)
    v1 = tfpipe.write_shards(corpus, tmp_path / "v1", num_shards=3, num_workers=0, features=FEAT,
                             format="tfrecord-example", progress=False)
    v2 = tfpipe.write_shards(corpus, tmp_path / "v2", num_shards=3, num_workers=0, features=FEAT, progress=False)
    assert [s["num_records"] for s in v1["shards"]] == [6, 6, 6]
    assert [s["num_records"] for s in v2["shards"]] == [1, 1, 1] and v2["shards"][0]["block_size"] == 6
    assert [s["class_counts"] for s in v1["shards"]] == [s["class_counts"] for s in v2["shards"]]
    pipe = tfpipe.PipelineConfig.optimized(batch_size=5, parallel_reads=False)
    a, la = _all(tfpipe.build_dataset(tmp_path / "v1", "eval", pipe))
    b, lb = _all(tfpipe.build_dataset(tmp_path / "v2", "eval", pipe))
    np.testing.assert_array_equal(a["log_mel"], b["log_mel"])  # the same examples, in the same order
    np.testing.assert_array_equal(la, lb)
    assert a["log_mel"].dtype == np.float32


def _legacy_v1_folder(root, corpus):
    """A folder as tfpipe 0.1 wrote it: format tfpipe-shards v1, sidecar-free, one example per record."""
    os.makedirs(root)
    source = tfpipe.find(corpus)
    waves = [np.asarray(offline.load_clip(p, FEAT)) for p in source.paths]
    shards = []
    for s, part in enumerate([(0, 6), (6, 12)]):
        name = f"train-{s:05d}-of-00002.tfrecord"
        with tf.io.TFRecordWriter(os.path.join(root, name)) as w:
            for i in range(*part):
                wave = np.zeros(FEAT.num_samples, "<f2")
                wave[:waves[i].size] = waves[i]
                feature = {"waveform": tf.train.Feature(bytes_list=tf.train.BytesList(value=[wave.tobytes()])),
                           "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[source.labels[i]])),
                           "path": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"x%d" % i]))}
                w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
        path = os.path.join(root, name)
        shards.append({"file": name, "num_examples": 6, "bytes": os.path.getsize(path), "sha256": sha256_file(path)})
    index = {"format": "tfpipe-shards", "version": 1, "split": "train", "num_examples": 12,
             "class_names": list(source.class_names), "features": dataclasses.asdict(FEAT), "store": "waveform",
             "dtype": "float16", "shape": [FEAT.num_samples], "shards": shards, "rejected": []}
    json.dump(index, open(os.path.join(root, "tfpipe.json"), "w"))
    return np.stack([np.pad(w, (0, FEAT.num_samples - w.size)) for w in waves]).astype(np.float16)


def test_a_version_1_folder_of_an_earlier_tfpipe_is_still_read_and_verified(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    want = _legacy_v1_folder(str(tmp_path / "old"), corpus)
    features = dataclasses.replace(FEAT, output="waveform")
    got, labels = _all(tfpipe.build_dataset(tmp_path / "old", "eval",
                                            tfpipe.PipelineConfig.optimized(batch_size=5), features))
    np.testing.assert_array_equal(got["waveform"], want.astype(np.float32))
    assert labels.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert verify.verify_folder(str(tmp_path / "old")).ok
    log_mel = tfpipe.build_dataset(tmp_path / "old", "eval", None, FEAT)  # log-mel from stored waveforms
    assert log_mel.element_spec[0]["log_mel"].shape.as_list() == [None, FEAT.num_frames, FEAT.n_mels]


# --- a clean folder -------------------------------------------------------------------------------------

def test_a_complete_folder_holds_shards_and_index_only_and_a_plain_glob_reads_it(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    out = tmp_path / "s"
    tfpipe.write_shards(corpus, out, num_shards=4, num_workers=0, features=FEAT, progress=False)
    index = tfpipe.write_shards(corpus, out, num_shards=3, num_workers=0, features=FEAT, progress=False)
    assert sorted(os.listdir(out)) == sorted([s["file"] for s in index["shards"]] + ["tfpipe.json"])
    files = tf.io.gfile.glob(str(out / "train-*"))  # what a new user does: the old 4 shards are gone
    examples = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(files)]
    assert sum(len(e.features.feature["label"].int64_list.value) for e in examples) == 12


def test_a_folder_holds_one_split_and_another_is_refused(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    tfpipe.write_shards(corpus, tmp_path / "s", num_shards=2, num_workers=0, features=FEAT, progress=False)
    with pytest.raises(tfpipe.DataError, match=r"holds split train shards.*writes split 'eval'.*own folder"):
        tfpipe.write_shards(corpus, tmp_path / "s", num_shards=2, num_workers=0, features=FEAT, split="eval",
                            progress=False)
    assert tfpipe.build_dataset(tmp_path / "s", "eval", None, FEAT) is not None  # untouched


def test_rerun_on_a_complete_folder_is_recognized_at_once_without_a_progress_bar(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    out = str(tmp_path / "s")
    first = _cli("prepare", "--input", corpus, "--output", out, "--clip_seconds", "0.25")
    assert first.returncode == 0, first.stderr
    # Small data: the defaults fit it, and the summary says what was chosen.
    assert "num shards: 12 (default: min(16, examples)" in first.stdout
    assert "num workers: 0 (default: by corpus size, 12 examples)" in first.stdout
    index, stats = tfpipe.storage.write_shards_with_stats(corpus, out, features=FEAT, store="log_mel",
                                                          dtype="float16", progress=False)
    assert stats.complete and stats.seconds < 0.5 and stats.processed == 0
    again = _cli("prepare", "--input", corpus, "--output", out, "--clip_seconds", "0.25")
    assert again.returncode == 0 and "already complete for this command" in again.stdout
    assert "tfpipe prepare:" not in again.stderr  # no progress bar filling up for nothing


def test_conversions_are_counted_in_the_summary_index_and_inspect(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", per_class=2, seconds=0.5)  # longer than clip_seconds: cropped
    out = str(tmp_path / "s")
    done = _cli("prepare", "--input", corpus, "--output", out, "--clip_seconds", "0.25", "--num_shards", "2")
    assert done.returncode == 0, done.stderr
    assert "converted: 6 cropped" in done.stdout
    assert json.load(open(os.path.join(out, "tfpipe.json")))["notes"] == {"cropped": 6}
    assert re.search(r"converted +6 cropped", _cli("inspect", out).stdout)


def test_an_input_listed_twice_is_rejected_by_name(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", per_class=2)
    rows = ["path,label", "a/a000.wav,a", "a/a001.wav,a", "b/b000.wav,b", "b/b001.wav,b", "a/a000.wav,a"]
    (tmp_path / "corpus" / "list.csv").write_text("\n".join(rows) + "\n")
    with pytest.raises(tfpipe.DataError, match=r"a000.wav: listed twice"):
        tfpipe.write_shards(str(tmp_path / "corpus" / "list.csv"), tmp_path / "s", num_shards=1, features=FEAT,
                            progress=False)
    index = tfpipe.write_shards(str(tmp_path / "corpus" / "list.csv"), tmp_path / "s", num_shards=2,
                                features=FEAT, on_error="skip", progress=False)
    assert index["num_examples"] == 4 and [r["reason"][:12] for r in index["rejected"]] == ["listed twice"]


# --- safety: concurrent writers, full disks, signals ------------------------------------------------



def test_a_second_prepare_into_the_same_folder_is_refused_at_once(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    out = tmp_path / "s"
    first = start_slow_writer(corpus, out, sleep=0.3, num_shards=3)
    try:
        deadline = time.time() + 60
        while not glob.glob(str(out / ".tfpipe-work" / "*.tmp-*")):
            assert first.poll() is None and time.time() < deadline
            time.sleep(0.05)
        second = _cli("prepare", "--input", corpus, "--output", str(out), "--clip_seconds", "0.25")
        assert second.returncode == 1 and "Traceback" not in second.stderr
        assert f"another tfpipe prepare (process {first.pid}) is writing this folder" in second.stderr
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()


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


def _session_processes(sid):
    found = []
    for pid in os.listdir("/proc"):
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except (OSError, ValueError):
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if pid.isdigit() and int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(pid))
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_stopping_prepare_stops_its_worker_processes(tmp_path, sig):
    corpus = make_corpus(tmp_path / "corpus", per_class=40)
    proc = subprocess.Popen([sys.executable, "-m", "tfpipe.cli", "prepare", "--input", corpus, "--output",
                             str(tmp_path / "s"), "--workers", "2", "--num_shards", "8", "--clip_seconds", "0.25"],
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while len(_session_processes(proc.pid)) < 4:  # prepare, forkserver, 2 workers
        assert proc.poll() is None and time.time() < deadline, "the workers never started"
        time.sleep(0.05)
    os.kill(proc.pid, sig)
    proc.wait(timeout=30)
    deadline = time.time() + 15
    while _session_processes(proc.pid) and time.time() < deadline:
        time.sleep(0.1)
    assert _session_processes(proc.pid) == []


# --- verify: every claim of the index, against the records -----------------------------------------

def _edit(out, fn):
    path = os.path.join(out, "tfpipe.json")
    index = json.load(open(path))
    fn(index)
    json.dump(index, open(path, "w"))


_EDITS = {
    "dtype": (lambda i: i["features"]["log_mel"].update(dtype="int16"), r"records hold .*log_mel:float16"),
    "dtype_size": (lambda i: i["features"]["log_mel"].update(dtype="float32"), r"unreadable record|records hold"),
    "shape": (lambda i: i["features"]["log_mel"].update(shape=[64, 26]), r"records hold .*26x64"),
    "class_names": (lambda i: i["class_names"].reverse(), r"class_names\[0\] is 'c'.*reordered"),
    "num_examples": (lambda i: i.update(num_examples=11), r"num_examples is 11 but the shards list 12"),
    "shard_count": (lambda i: i["shards"][0].update(num_examples=3), r"examples, index lists 3"),
    "class_counts": (lambda i: i["shards"][0].update(class_counts=[0, 0, 4]), r"per class .* index lists"),
}


@pytest.mark.parametrize("fmt", FORMATS)
def test_verify_catches_every_index_edit(tmp_path, fmt):
    corpus = make_corpus(tmp_path / "corpus")
    clean = tmp_path / "clean"
    tfpipe.write_shards(corpus, clean, num_shards=3, num_workers=0, features=FEAT, format=fmt, progress=False)
    assert verify.verify_folder(str(clean)).ok
    for name, (edit, problem) in _EDITS.items():
        out = tmp_path / name
        subprocess.run(["cp", "-r", str(clean), str(out)], check=True)
        _edit(out, edit)
        checked = verify.verify_folder(str(out))
        found = "; ".join(checked.problems + [c.problem for c in checked.shards if c.problem])
        assert re.search(problem, found), (name, found)
    stray = tmp_path / "stray"
    subprocess.run(["cp", "-r", str(clean), str(stray)], check=True)
    os.link(stray / "train-00000-of-00003.tfrecord", stray / "train-00000-of-00004.tfrecord")
    assert "train-00000-of-00004.tfrecord" in verify.verify_folder(str(stray)).problems[0]
    done = _cli("inspect", str(tmp_path / "class_names"), "--verify")
    assert done.returncode == 1 and "reordered" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_lowered_shard_count_fails_on_read_naming_the_shard(tmp_path, fmt):
    corpus = make_corpus(tmp_path / "corpus")
    out = tmp_path / "s"
    tfpipe.write_shards(corpus, out, num_shards=2, num_workers=0, features=FEAT, format=fmt, progress=False)

    def lower(index):
        shard = index["shards"][1]
        shard["num_examples"] -= 1
        shard["num_records"] = max(1, shard["num_records"] - 1) if fmt == "tfrecord-example" else 1
        index["num_examples"] -= 1

    _edit(out, lower)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"train-00001-of-00002.tfrecord: (more records|damaged)"):
        _all(tfpipe.build_dataset(out, "eval", None, FEAT))


def test_bad_indexes_are_errors_that_name_the_index(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    out = tmp_path / "s"
    tfpipe.write_shards(corpus, out, num_shards=2, num_workers=0, features=FEAT, progress=False)
    _edit(out, lambda i: i["shards"][0].update(file="../../outside/x.tfrecord"))
    with pytest.raises(tfpipe.DataError, match=r"tfpipe.json: shard '../../outside/x.tfrecord' is not a file name "
                                               r"inside the folder"):
        tfpipe.build_dataset(out, "eval", None, FEAT)
    done = _cli("inspect", str(out), "--verify")
    assert done.returncode == 1 and "outside" in done.stderr and "Traceback" not in done.stderr
    _edit(out, lambda i: i.pop("shards"))
    with pytest.raises(tfpipe.DataError, match=r"tfpipe.json: not a complete shard index: no 'shards'"):
        tfpipe.build_dataset(out, "eval", None, FEAT)


# --- Apache Beam -------------------------------------------------------------------------------------

def test_beam_direct_runner_writes_the_local_writers_shards_byte_for_byte(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    bad = tmp_path / "corpus" / "b" / "empty.wav"
    bad.write_bytes(b"")
    local = tfpipe.write_shards(corpus, tmp_path / "local", num_shards=3, num_workers=0, features=FEAT,
                                on_error="skip", seed=3, progress=False)
    beam = tfpipe.write_shards(corpus, tmp_path / "beam", num_shards=3, features=FEAT, on_error="skip", seed=3,
                               runner="beam", progress=False)  # DirectRunner, 2 worker processes
    assert beam == local and beam["rejected"] == [{"path": "b/empty.wav", "reason": "empty file (0 bytes); "
                                                                                      "remove it or copy it again"}]
    for shard in local["shards"]:
        assert (tmp_path / "beam" / shard["file"]).read_bytes() == (tmp_path / "local" / shard["file"]).read_bytes()
    assert sorted(os.listdir(tmp_path / "beam")) == sorted(os.listdir(tmp_path / "local"))
    with pytest.raises(tfpipe.DataError, match=r"empty.wav: empty file"):  # the same up-front check
        tfpipe.write_shards(corpus, tmp_path / "beam2", num_shards=3, features=FEAT, runner="beam",
                            progress=False)


def test_beam_user_examples_in_memory_and_cli_flags(tmp_path):
    examples = _user_examples(6)
    local = tfpipe.write_shards(examples, tmp_path / "local", num_shards=2, progress=False)
    beam = tfpipe.write_shards(examples, tmp_path / "beam", num_shards=2, runner="beam",
                               beam_options="--runner=DirectRunner --direct_running_mode=in_memory", progress=False)
    assert beam == local
    with pytest.raises(ValueError, match=r"beam_options=.*not valid Beam pipeline options"):
        tfpipe.write_shards(examples, tmp_path / "x", num_shards=2, runner="beam", beam_options="--runner",
                            progress=False)
