"""storage/index.py: tfpipe.json made, saved atomically, read back checked; folders of earlier versions upgraded."""

import dataclasses
import errno
import json
import os

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.domains.audio import offline
from tfpipe.storage import index as index_lib
from tfpipe.storage import verify
from tfpipe.storage.index import sha256_file

from tests.support import make_corpus

FEAT = tfpipe.AudioConfig(clip_seconds=0.25)


def _shard(file, n, counts):
    return {"file": file, "num_examples": n, "num_records": 1, "block_size": n, "bytes": 10, "sha256": "ab",
            "class_counts": counts, "notes": {"cropped": 1}, "rejected": []}


def test_make_index_totals_shards_in_plan_order_and_rejected_by_path():
    header = {"format": "tfrecord-block", "split": "train", "class_names": ["a", "b"], "features": {},
              "plan": {"num_shards": 2, "seed": 0}, "key": "k"}
    index = index_lib.make_index(header, [_shard("s0", 3, [2, 1]), _shard("s1", 2, [1, 1])],
                                 [{"path": "z.wav", "reason": "empty"}, {"path": "a.wav", "reason": "cut"}])
    assert index["num_examples"] == 5 and [s["file"] for s in index["shards"]] == ["s0", "s1"]
    assert index["notes"] == {"cropped": 2} and [r["path"] for r in index["rejected"]] == ["a.wav", "z.wav"]
    assert "rejected" not in index["shards"][0] and index["version"] == index_lib.VERSION
    index_lib.check_counts(index, 7)  # found = written + rejected
    with pytest.raises(RuntimeError, match=r"tfpipe bug: found 8 inputs but wrote 5 and rejected 2"):
        index_lib.check_counts(index, 8)


def test_json_is_written_atomically_and_a_full_disk_is_named(tmp_path):
    path = str(tmp_path / "tfpipe.json")
    index_lib.write_json_atomic(path, {"a": [1, None]})
    assert json.load(open(path)) == {"a": [1, None]} and os.listdir(tmp_path) == ["tfpipe.json"]
    full = index_lib.disk_error(OSError(errno.ENOSPC, "No space left on device"), path)
    assert isinstance(full, tfpipe.DataError) and str(full).startswith(f"{path}: cannot write: the disk is full")
    other = OSError(errno.EACCES, "Permission denied")
    assert index_lib.disk_error(other, path) is other
    assert index_lib.size_problem(path, 1) == f"{os.path.getsize(path)} bytes on disk but tfpipe.json lists 1"
    assert index_lib.size_problem(str(tmp_path / "gone"), 1).startswith("shard missing")


def _edit(out, fn):
    path = os.path.join(out, "tfpipe.json")
    index = json.load(open(path))
    fn(index)
    json.dump(index, open(path, "w"))


def test_bad_indexes_are_errors_that_name_the_index(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    out = tmp_path / "s"
    tfpipe.write_shards(corpus, out, num_shards=2, num_workers=0, features=FEAT, progress=False)
    _edit(out, lambda i: i["shards"][0].update(file="../../outside/x.tfrecord"))
    with pytest.raises(tfpipe.DataError, match=r"tfpipe.json: shard '../../outside/x.tfrecord' is not a file name "
                                               r"inside the folder"):
        tfpipe.build_dataset(out, "eval", None, FEAT)
    _edit(out, lambda i: i.pop("shards"))
    with pytest.raises(tfpipe.DataError, match=r"tfpipe.json: not a complete shard index: no 'shards'"):
        tfpipe.build_dataset(out, "eval", None, FEAT)
    (out / "tfpipe.json").write_text("[1, 2]")
    with pytest.raises(tfpipe.DataError, match=r"tfpipe.json: not a tfpipe shard index \(a JSON list\)"):
        index_lib.read_index(str(out))


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
    batches = list(tfpipe.build_dataset(tmp_path / "old", "eval", tfpipe.PipelineConfig.optimized(batch_size=5),
                                        features))
    np.testing.assert_array_equal(np.concatenate([f["waveform"] for f, _ in batches]), want.astype(np.float32))
    assert np.concatenate([y for _, y in batches]).tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert verify.verify_folder(str(tmp_path / "old")).ok
    log_mel = tfpipe.build_dataset(tmp_path / "old", "eval", None, FEAT)  # log-mel from stored waveforms
    assert log_mel.element_spec[0]["log_mel"].shape.as_list() == [None, FEAT.num_frames, FEAT.n_mels]
