"""storage/shard_job.py: one shard written atomically; a killed writer leaves no half shard, a rerun finishes it."""

import glob
import json
import os

import pytest

import tfpipe
from tfpipe.storage import index as index_lib
from tfpipe.storage.shard_job import display, input_key, reject_reason
from tfpipe.storage.verify import verify_shards

from tests.storage.test_writer import stored_paths
from tests.support import kill_group, make_corpus, start_paused_writer

FEAT = tfpipe.AudioConfig(clip_seconds=0.25)


def _write(data, out, **kwargs):
    kwargs = {"num_shards": 6, "num_workers": 0, "features": FEAT, "progress": False, **kwargs}
    return tfpipe.write_shards(data, out, **kwargs)


def test_keys_and_reasons():
    assert input_key({"a": 1}, ["x"]) == input_key({"a": 1}, ["x"]) != input_key({"a": 2}, ["x"])
    assert reject_reason("/d/caf\udce9.wav: empty file", "/d/caf\udce9.wav") == "empty file"
    assert display("caf\udce9.wav") == "caf\\xe9.wav" and display("ü") == "ü"


def _kill_inside_shard_1(corpus, out, **kwargs):
    """Runs a writer until it is inside shard 1 (shard 0 whole), then SIGKILLs it."""
    kill_group(start_paused_writer(corpus, out, num_shards=6, pause=1, **kwargs))
    assert (out / ".tfpipe-work" / "train-00000-of-00006.tfrecord.json").exists()  # shard 0's manifest
    assert glob.glob(str(out / ".tfpipe-work" / "train-00001-*.tmp-*"))  # shard 1, half written


@pytest.mark.parametrize("fmt", ["tfrecord-block", "tfrecord-example"])
def test_killed_run_leaves_no_half_shard_and_rerun_ends_identical(tmp_path, fmt):
    corpus = make_corpus(tmp_path / "corpus", per_class=8)
    reference = _write(corpus, tmp_path / "reference", format=fmt)
    out = tmp_path / "out"
    _kill_inside_shard_1(corpus, out, fmt=fmt)
    assert not (out / "tfpipe.json").exists()
    by_file = {s["file"]: s["sha256"] for s in reference["shards"]}
    shard_files = glob.glob(str(out / "train-*"))  # the reader's glob: shards only, every one whole
    assert [os.path.basename(p) for p in shard_files] == ["train-00000-of-00006.tfrecord"]
    for path in shard_files:
        assert index_lib.sha256_file(path) == by_file[os.path.basename(path)]
    first = out / "train-00000-of-00006.tfrecord"
    before = os.stat(first)

    resumed = _write(corpus, out, num_workers=2, format=fmt)  # the same command, 2 processes
    assert resumed == reference
    assert json.loads((out / "tfpipe.json").read_text()) == reference
    after = os.stat(first)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not rewritten
    assert sorted(os.listdir(out)) == sorted([s["file"] for s in reference["shards"]] + ["tfpipe.json"])
    assert [c.problem for c in verify_shards(str(out))] == [""] * 6


def test_interrupted_rerun_with_another_seed_never_reads_wrong_data(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", per_class=8)
    out = tmp_path / "out"
    _write(corpus, out)
    _kill_inside_shard_1(corpus, out, seed=1, overwrite=True)  # another plan: shards are replaced one by one
    # The old index went before the first new shard: the folder is not a shard folder until rerun.
    assert not (out / "tfpipe.json").exists()
    with pytest.raises(tfpipe.DataError, match=r"an unfinished tfpipe prepare .*rerun the same prepare command"):
        tfpipe.build_dataset(out, "eval", None, FEAT)
    rerun = _write(corpus, out, seed=1)
    assert rerun == _write(corpus, tmp_path / "reference", seed=1)
    wavs = sorted(os.path.relpath(p, corpus).encode() for p in glob.glob(os.path.join(corpus, "*", "*.wav")))
    assert sorted(stored_paths(out)) == wavs  # every clip exactly once
