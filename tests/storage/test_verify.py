"""storage/verify.py: every claim of the index checked against the records; problems named, never raised."""

import json
import os
import re
import shutil

import pytest

import tfpipe
from tfpipe.storage import verify

from tests.support import make_corpus

FEAT = tfpipe.AudioConfig(clip_seconds=0.25)
FORMATS = ["tfrecord-block", "tfrecord-example"]


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


def _problems(folder):
    checked = verify.verify_folder(str(folder))
    return "; ".join(checked.problems + [c.problem for c in checked.shards if c.problem])


@pytest.mark.parametrize("fmt", FORMATS)
def test_verify_catches_every_index_edit(tmp_path, fmt):
    corpus = make_corpus(tmp_path / "corpus")
    clean = tmp_path / "clean"
    tfpipe.write_shards(corpus, clean, num_shards=3, num_workers=0, features=FEAT, format=fmt, progress=False)
    assert verify.verify_folder(str(clean)).ok
    for name, (edit, problem) in _EDITS.items():
        out = tmp_path / name
        shutil.copytree(clean, out)
        _edit(out, edit)
        assert re.search(problem, _problems(out)), (name, _problems(out))
    stray = tmp_path / "stray"
    shutil.copytree(clean, stray)
    os.link(stray / "train-00000-of-00003.tfrecord", stray / "train-00000-of-00004.tfrecord")
    assert "train-00000-of-00004.tfrecord" in verify.verify_folder(str(stray)).problems[0]


@pytest.mark.parametrize("fmt", FORMATS)
def test_verify_reads_variable_length_shards_and_names_a_shard_it_cannot_open(tmp_path, fmt):
    import numpy as np

    examples = [{"t": np.arange(n), "label": n % 2} for n in (3, 1, 4, 1, 5, 9)]
    tfpipe.write_shards(examples, tmp_path / "s", num_shards=2, format=fmt, progress=False)
    assert verify.verify_folder(str(tmp_path / "s")).ok
    _edit(tmp_path / "s", lambda i: i["features"]["t"].update(shape=[None, 2]))
    assert re.search(r"records hold 't:int64:\?' but tfpipe.json says 't:int64:\?x2'|unreadable record",
                     _problems(tmp_path / "s"))
    victim = tmp_path / "s" / "train-00001-of-00002.tfrecord"
    if os.geteuid() != 0:  # root reads a chmod 000 file
        os.chmod(victim, 0)
        assert verify.verify_folder(str(tmp_path / "s")).shards[1].problem == "cannot be read (Permission denied)"
        os.chmod(victim, 0o644)
    os.remove(victim)
    os.symlink(victim.name, victim)  # a looping link: no file there, even for root
    with pytest.raises(tfpipe.DataError, match=r"1 shard files listed in tfpipe.json are missing, e.g. .*00001"):
        verify.verify_folder(str(tmp_path / "s"))
