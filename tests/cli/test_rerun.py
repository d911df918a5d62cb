"""tfpipe/cli/rerun.py: the same `tfpipe prepare` command on its complete folder says "nothing to do" before
TensorFlow loads (issue 32: it took ~2.4 s of CPU); anything else goes to the writer, which decides."""

import json
import os
import subprocess
import sys

from tests.support import ROOT, SAYS_IF_TF_LOADED, make_corpus


def _prepare(*args):
    """`tfpipe prepare ARGS` (stderr ends with whether TensorFlow loaded)."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run = subprocess.run([sys.executable, "-c", SAYS_IF_TF_LOADED, "prepare", *args], capture_output=True,
                         text=True, timeout=120, env=env, cwd=ROOT)
    return run, run.stderr.strip().endswith("tensorflow not loaded")


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

    # Another flag: the writer decides (here: refused, other settings).
    other, quick = _prepare(*args, "--n_mels", "32")
    assert other.returncode == 1 and not quick and "other settings" in other.stderr

    # An input touched: the writer finds the folder's inputs changed and updates it; then quick again.
    os.utime(os.path.join(corpus, "a", "a000.wav"), ns=(1, 1))
    touched, quick = _prepare(*args)
    assert touched.returncode == 0 and not quick and "nothing to do" not in touched.stdout, touched.stderr[-2000:]
    assert _prepare(*args)[1]

    # A damaged shard: the writer rewrites it.
    shard = os.path.join(out, json.load(open(os.path.join(out, "tfpipe.json")))["shards"][0]["file"])
    with open(shard, "r+b") as f:
        f.truncate(10)
    damaged, quick = _prepare(*args)
    assert damaged.returncode == 0 and not quick and "wrote 6 examples in 2 shards" in damaged.stdout
    assert os.path.getsize(shard) > 10

    # The folder rewritten by another writer (here the Python API): its index is not the one the record saw.
    import tfpipe

    tfpipe.write_shards(corpus, out, num_shards=3, features=tfpipe.AudioConfig(clip_seconds=0.25), overwrite=True,
                        progress=False)
    refused, quick = _prepare(*args)
    assert refused.returncode == 1 and not quick and "num_shards: 3 -> 2" in refused.stderr, refused.stderr[-2000:]


def test_a_csv_manifest_or_a_missing_record_goes_to_the_writer(tmp_path):
    from tfpipe.cli import rerun

    corpus = make_corpus(tmp_path / "corpus", per_class=1)
    manifest = tmp_path / "m.csv"
    manifest.write_text("path,label\n" + "".join(f"{corpus}/{c}/{c}000.wav,{c}\n" for c in "abc"))

    class Flags:
        @staticmethod
        def flags_by_module_dict():
            return {}

    assert rerun.command_key(str(manifest), Flags) is None and rerun.command_key("gs://b/data", Flags) is None
    key = rerun.command_key(corpus, Flags)
    assert len(key) == 64 and rerun.command_key(corpus, Flags) == key
    os.utime(os.path.join(corpus, "b", "b000.wav"), ns=(5, 5))
    assert rerun.command_key(corpus, Flags) != key  # a touched input is another command's input
    assert rerun.complete(str(tmp_path / "nowhere"), key) is None and rerun.complete(corpus, None) is None
