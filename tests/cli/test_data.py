"""`tfpipe prepare` and `tfpipe inspect` as a user runs them (real subprocesses): summaries, refusals, errors."""

import json
import os
import re
import subprocess
import sys

import pytest

import tfpipe
from tfpipe import compat

from tests.storage.test_writer import read_only
from tests.support import make_corpus

FEAT = tfpipe.AudioConfig(clip_seconds=0.25)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "tfpipe.cli", *args], capture_output=True, text=True, timeout=120)


def _one_line_error(run, prog="tfpipe prepare"):
    """Exit 1 and one line 'PROG: error: ...', no traceback."""
    assert run.returncode == 1, (run.returncode, run.stdout[-1000:], run.stderr[-2000:])
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    lines = [line for line in run.stderr.splitlines() if line.strip() and not line.startswith(prog + ":  ")]
    assert lines[-1].startswith(f"{prog}: error: "), run.stderr[-2000:]
    return lines[-1]


def test_prepare_says_what_it_chose_recognizes_a_rerun_and_replaces_other_settings_only_with_overwrite(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    out = str(tmp_path / "s")
    first = _cli("prepare", "--input", corpus, "--output", out, "--clip_seconds", "0.25")
    assert first.returncode == 0, first.stderr
    # Small data: the defaults fit it, and the summary says what was chosen.
    assert "num shards: 12 (default: min(16, examples)" in first.stdout
    assert "num workers: 0 (default: by corpus size, 12 examples)" in first.stdout
    assert re.search(r"^processed 12 examples in [\d.]+ s in this process: [\d,]+ examples/s", first.stdout, re.M)
    again = _cli("prepare", "--input", corpus, "--output", out, "--clip_seconds", "0.25")
    assert again.returncode == 0 and "already complete for this command" in again.stdout
    assert "tfpipe prepare:" not in again.stderr  # no progress bar filling up for nothing
    other = _cli("prepare", "--input", corpus, "--output", out, "--clip_seconds", "0.25", "--n_mels", "32")
    line = _one_line_error(other)
    assert re.search(r"s: a complete shard folder written with other settings \(.*n_mels: 64 -> 32.*\); replacing "
                     r"it would discard it: pass --overwrite", line), line
    replaced = _cli("prepare", "--input", corpus, "--output", out, "--clip_seconds", "0.25", "--n_mels", "32",
                    "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    assert json.load(open(os.path.join(out, "tfpipe.json")))["domain"]["config"]["n_mels"] == 32


def test_prepare_with_another_input_and_the_same_settings_is_refused_without_overwrite(tmp_path):
    # Issue 32: a complete 12-example, 3-class folder was replaced by another --input's 2 classes.
    out = str(tmp_path / "s")
    first = _cli("prepare", "--input", make_corpus(tmp_path / "corpus"), "--output", out, "--clip_seconds", "0.25")
    assert first.returncode == 0, first.stderr
    other = make_corpus(tmp_path / "other", classes=("a", "b"), per_class=2)
    line = _one_line_error(_cli("prepare", "--input", other, "--output", out, "--clip_seconds", "0.25"))
    assert re.search(r"s: a complete shard folder written from other data \(input: .*corpus -> .*other; classes: "
                     r"3 \[a, b, c\] -> 2 \[a, b\]\); replacing it would discard it: pass --overwrite", line), line
    assert json.load(open(os.path.join(out, "tfpipe.json")))["num_examples"] == 12
    replaced = _cli("prepare", "--input", other, "--output", out, "--clip_seconds", "0.25", "--overwrite")
    assert replaced.returncode == 0 and json.load(open(os.path.join(out, "tfpipe.json")))["num_examples"] == 4


def test_conversions_are_counted_in_the_summary_index_and_inspect(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", per_class=2, seconds=0.5)  # longer than clip_seconds: cropped
    out = str(tmp_path / "s")
    done = _cli("prepare", "--input", corpus, "--output", out, "--clip_seconds", "0.25", "--num_shards", "2")
    assert done.returncode == 0, done.stderr
    assert "converted: 6 cropped" in done.stdout
    assert json.load(open(os.path.join(out, "tfpipe.json")))["notes"] == {"cropped": 6}
    assert re.search(r"converted +6 cropped", _cli("inspect", out).stdout)


def test_prepare_then_inspect_verify_names_a_corrupted_shard(corpus, tmp_path):
    out = str(tmp_path / "shards")  # as `tfpipe prepare --num_shards 3 --clip_seconds 0.25` writes it
    tfpipe.write_shards(corpus, out, num_shards=3, num_workers=0, features=FEAT, dtype="float16", progress=False)
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
    line = _one_line_error(verified, "tfpipe inspect")
    assert "train-00001-of-00003.tfrecord: sha256 differs" in line and "train-00000-of-00003.tfrecord" not in line


def test_inspect_verify_names_an_edited_index_and_a_shard_it_cannot_read(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", per_class=2)
    out = tmp_path / "s"
    tfpipe.write_shards(corpus, out, num_shards=2, num_workers=0, features=FEAT, progress=False)
    path = out / "tfpipe.json"
    index = json.loads(path.read_text())
    index["class_names"].reverse()
    path.write_text(json.dumps(index))
    assert "reordered" in _one_line_error(_cli("inspect", str(out), "--verify"), "tfpipe inspect")
    victim = out / index["shards"][0]["file"]
    if os.geteuid() == 0:  # root reads a chmod 000 file: a looping link cannot be opened by anyone
        os.remove(victim)
        os.symlink(victim.name, victim)
    else:
        os.chmod(victim, 0)
    for args in (["inspect", str(out), "--verify"], ["inspect", str(out)]):
        line = _one_line_error(_cli(*args), "tfpipe inspect")
        assert str(victim) in line and re.search(r"missing|cannot be read", line), line


def test_output_that_is_a_file_or_in_a_read_only_folder_is_one_line_naming_it(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", per_class=1)
    (tmp_path / "file").write_text("x")
    line = _one_line_error(_cli("prepare", "--input", corpus, "--output", str(tmp_path / "file")))
    assert f"{tmp_path}/file: exists and is not a folder" in line
    with read_only(tmp_path / "ro") as ro:
        line = _one_line_error(_cli("prepare", "--input", corpus, "--output", os.path.join(ro, "s")))
    assert f"cannot write in {ro} (permission denied)" in line


def test_a_file_name_that_is_not_utf8_is_prepared_and_named_when_bad(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", per_class=1)
    folder = os.path.join(os.fsencode(corpus), b"a")
    os.rename(os.path.join(folder, b"a000.wav"), os.path.join(folder, b"\xe9.wav"))
    done = _cli("prepare", "--input", corpus, "--output", str(tmp_path / "s"), "--clip_seconds", "0.25")
    assert done.returncode == 0 and "found 3 = written 3 + rejected 0" in done.stdout, done.stderr
    open(os.path.join(os.fsencode(corpus), b"b", b"\xfe.wav"), "wb").close()
    bad = _cli("prepare", "--input", corpus, "--output", str(tmp_path / "t"), "--clip_seconds", "0.25")
    assert bad.returncode == 1 and "Traceback" not in bad.stderr and "b/\\xfe.wav: empty file" in bad.stderr, bad.stderr
    skipped = _cli("prepare", "--input", corpus, "--output", str(tmp_path / "t"), "--clip_seconds", "0.25",
                   "--on_error=skip")
    assert skipped.returncode == 0 and "found 4 = written 3 + rejected 1" in skipped.stdout, skipped.stderr


def test_hand_run_multi_host_mode_is_retired_with_the_beam_replacement_named(corpus, tmp_path):
    with pytest.raises(ValueError, match=r"multi-host mode is retired.*runner='beam'"):
        tfpipe.write_shards(corpus, tmp_path / "multi", num_shards=4, worker_index=1, num_hosts=2, features=FEAT)
    with pytest.raises(tfpipe.DataError, match=r"retired.*--runner=beam"):
        compat.merge_index(str(tmp_path / "multi"))
    line = _one_line_error(_cli("prepare", "--input", corpus, "--output", str(tmp_path / "m"), "--num_hosts", "2"))
    assert "--runner=beam" in line


# `tfpipe prepare` paused inside its second shard (as tests.support.PAUSED_WRITER pauses write_shards), so
# Ctrl-C lands while it writes: no timing to guess.
_PAUSED_PREPARE = """
import sys, time
from tfpipe.storage import shard_job
shard_job._CHUNK_EXAMPLES = 1
chunk = shard_job._chunk_examples
def paused(job, inputs, *rest):
    if job.spec.index == 1 and inputs.start == 1:
        open(sys.argv[1], "w").close()
        while True:
            time.sleep(60)
    return chunk(job, inputs, *rest)
shard_job._chunk_examples = paused
from tfpipe.cli import main
main(["tfpipe", "prepare"] + sys.argv[2:])
"""


def test_ctrl_c_in_prepare_is_one_line_and_exit_130_and_the_same_command_finishes(corpus, tmp_path):
    import signal
    import time

    out, marker = str(tmp_path / "s"), str(tmp_path / "paused")
    args = ["--input", corpus, "--output", out, "--clip_seconds", "0.25", "--num_shards", "3", "--workers", "0"]
    # A terminal's Ctrl-C: SIGINT to the whole process group, with the default disposition.
    proc = subprocess.Popen([sys.executable, "-c", _PAUSED_PREPARE, marker, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not os.path.exists(marker):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err[-3000:])
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    said = [line for line in err.splitlines() if line.strip() and not line.startswith("tfpipe prepare:  ")]
    assert said == ["tfpipe prepare: stopped (Ctrl-C); finished shards are kept: rerun the same command to go on"]
    assert not os.path.exists(os.path.join(out, "tfpipe.json"))  # partial output never looks complete
    done = _cli("prepare", *args)
    assert done.returncode == 0 and "1 of 3 shards were already complete" in done.stdout, done.stderr[-2000:]
