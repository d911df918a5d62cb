"""storage/workers.py: worker processes write the same bytes as this process, and stop when prepare stops."""

import os
import signal
import subprocess
import sys
import time

import pytest

import tfpipe

from tests.support import make_corpus

FEAT = tfpipe.AudioConfig(clip_seconds=0.25)


def test_worker_processes_write_the_bytes_this_process_writes(tmp_path):
    # Workers compute with this process's intra-op thread count: a kernel that splits a sum over
    # threads differently rounds the last bit differently (one float16 ulp, seen on other CPUs).
    corpus = make_corpus(tmp_path / "corpus", per_class=4)
    here = tfpipe.write_shards(corpus, tmp_path / "here", num_shards=4, num_workers=0, features=FEAT, progress=False)
    pool = tfpipe.write_shards(corpus, tmp_path / "pool", num_shards=4, num_workers=2, features=FEAT, progress=False)
    assert pool == here  # sizes and sha256 of every shard included
    for shard in here["shards"]:
        assert (tmp_path / "pool" / shard["file"]).read_bytes() == (tmp_path / "here" / shard["file"]).read_bytes()


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
