"""tfpipe/cli/rerun.py: the same `tfpipe prepare` command on its complete folder says "nothing to do" before
TensorFlow loads (issue 32: it took ~2.4 s of CPU); anything else goes to the writer, which decides."""

import json
import os
import shutil
import subprocess
import sys
import types

from tests.support import ROOT, SAYS_IF_TF_LOADED, make_corpus


def _prepare(*args):
    """`tfpipe prepare ARGS`, and whether TensorFlow stayed unloaded."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run = subprocess.run([sys.executable, "-c", SAYS_IF_TF_LOADED, "prepare", *args], capture_output=True,
                         text=True, timeout=120, env=env, cwd=ROOT)
    return run, run.stderr.strip().endswith("tensorflow not loaded")


class _Flags:
    """What command_key reads of absl's FlagValues: the flags each tfpipe module defined."""

    def __init__(self, **values):
        self.values = values

    def flags_by_module_dict(self):
        return {"tfpipe.cli.data": [types.SimpleNamespace(name=k, value=v) for k, v in self.values.items()]}

    def __getitem__(self, name):
        return types.SimpleNamespace(value=self.values.get(name))

    def __iter__(self):
        return iter(self.values)

    def __contains__(self, name):
        return name in self.values


def test_the_same_command_on_its_complete_folder_answers_before_tensorflow_loads(tmp_path):
    corpus, out = make_corpus(tmp_path / "corpus", per_class=2), str(tmp_path / "s")
    args = ["--input", corpus, "--output", out, "--clip_seconds", "0.25", "--num_shards", "2"]
    first, _ = _prepare(*args)
    assert first.returncode == 0 and "wrote 6 examples in 2 shards" in first.stdout, first.stderr[-2000:]
    again, quick = _prepare(*args)
    assert again.returncode == 0 and quick, again.stderr[-2000:]
    assert again.stdout.startswith(f"{out} is already complete for this command (checked in ")
    assert "nothing to do\nwrote 6 examples in 2 shards" in again.stdout  # the same summary as the writer's
    assert sorted(os.listdir(out))[:2] == [".tfpipe-prepare.json", "tfpipe.json"]  # hidden: no shard glob reads it

    # An input touched: the writer (TensorFlow) finds the inputs changed and updates the folder; then quick again.
    os.utime(os.path.join(corpus, "a", "a000.wav"), ns=(1, 1))
    touched, quick = _prepare(*args)
    assert touched.returncode == 0 and not quick and "nothing to do" not in touched.stdout, touched.stderr[-2000:]
    assert _prepare(*args)[1]


def test_only_the_same_command_the_same_inputs_and_the_same_intact_folder_are_complete(tmp_path):
    from tfpipe.cli import rerun

    corpus = make_corpus(tmp_path / "corpus", per_class=1)
    flags = _Flags(input=corpus, output="s", n_mels=None, num_shards=2)
    key = rerun.command_key(corpus, flags)
    assert len(key) == 64 and rerun.command_key(corpus, _Flags(**flags.values)) == key
    assert rerun.command_key(corpus, _Flags(**{**flags.values, "num_shards": 3})) != key  # another flag
    assert rerun.command_key(corpus, _Flags(**{**flags.values, "n_mels": 32})) != key  # another config
    manifest = tmp_path / "m.csv"
    manifest.write_text("path,label\n" + "".join(f"{corpus}/{c}/{c}000.wav,{c}\n" for c in "abc"))
    assert rerun.command_key(str(manifest), flags) is None and rerun.command_key("gs://b/data", flags) is None

    # A finished folder as the writer leaves it, and its record.
    out = tmp_path / "s"
    out.mkdir()
    (out / "train-00000-of-00001.tfrecord").write_bytes(b"x" * 10)
    index = {"format": "tfrecord-block", "version": 2, "split": "train", "class_names": ["a"], "num_examples": 1,
             "features": {"v": {"dtype": "float32", "shape": [1]}}, "rejected": [], "label_key": "label",
             "shards": [{"file": "train-00000-of-00001.tfrecord", "bytes": 10, "num_examples": 1, "sha256": "0",
                         "num_records": 1}]}
    (out / "tfpipe.json").write_text(json.dumps(index))
    rerun.remember(str(out), key)
    assert rerun.complete(str(out), key).index["num_examples"] == 1 and rerun.complete(str(out), None) is None
    assert rerun.complete(str(out), "0" * 64) is None  # another command
    os.utime(os.path.join(corpus, "b", "b000.wav"), ns=(5, 5))
    assert rerun.command_key(corpus, flags) != key  # a touched input: another command's input
    (out / "train-00000-of-00001.tfrecord").write_bytes(b"x" * 9)
    assert rerun.complete(str(out), key) is None  # a damaged shard
    (out / "train-00000-of-00001.tfrecord").write_bytes(b"x" * 10)
    (out / "tfpipe.json").write_text(json.dumps(index, indent=1))
    assert rerun.complete(str(out), key) is None  # the folder written again, by anyone
    shutil.rmtree(out)
    assert rerun.complete(str(out), key) is None
