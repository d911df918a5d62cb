"""storage/folder.py: one writer at a time, and no rewrite under a live reader (real processes)."""

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

import tfpipe
from tfpipe.storage.folder import OutputFolder

from tests.support import make_corpus

FEAT = tfpipe.AudioConfig(clip_seconds=0.25)


def _write(data, out, **kwargs):
    kwargs = {"num_shards": 3, "num_workers": 0, "features": FEAT, "progress": False, **kwargs}
    return tfpipe.write_shards(data, out, **kwargs)


def test_a_second_prepare_into_the_same_folder_is_refused_at_once(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", per_class=1)
    out = tmp_path / "s"
    with OutputFolder(str(out), "train"):  # what a running prepare holds while it writes
        second = subprocess.run([sys.executable, "-m", "tfpipe.cli", "prepare", "--input", corpus, "--output",
                                 str(out), "--clip_seconds", "0.25"], capture_output=True, text=True, timeout=120)
    assert second.returncode == 1 and "Traceback" not in second.stderr, second.stderr
    import os

    assert f"another tfpipe prepare (process {os.getpid()}) is writing this folder" in second.stderr


# A trainer: builds a train dataset over the folder, reads a batch, then waits for a line on stdin and reads
# more; prints every log-mel it read, so the test can tell old examples from new ones.
_READER = """
import sys
import numpy as np
import tfpipe
ds = tfpipe.build_dataset(sys.argv[1], "train", tfpipe.PipelineConfig.optimized(batch_size=4, seed=0),
                          tfpipe.AudioConfig(clip_seconds=0.25))
batches = iter(ds)
first = next(batches)[0]["log_mel"].numpy()
print("reading", flush=True)
sys.stdin.readline()
rest = [next(batches)[0]["log_mel"].numpy() for _ in range(6)]
np.save(sys.argv[2], np.concatenate([first] + rest))
"""


def test_a_rewrite_under_a_live_reader_is_refused_naming_it_and_the_reader_reads_only_old_examples(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    out = tmp_path / "s"
    _write(corpus, out)
    old = {x.tobytes() for f, _ in tfpipe.build_dataset(out, "eval", None, FEAT) for x in f["log_mel"].numpy()}
    reader = subprocess.Popen([sys.executable, "-c", _READER, str(out), str(tmp_path / "read.npy")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "reading", reader.stderr.read()[-2000:]
        other = dataclasses.replace(FEAT, fmax=4000.0)  # the case: prepare --fmax 4000 into the folder
        with pytest.raises(tfpipe.DataError, match=rf"s: process {reader.pid} \(.*python.*\) is reading this shard "
                                                   rf"folder .*mix old and new examples.*Stop it first, or write "
                                                   rf"to another --output"):
            _write(corpus, out, features=other, overwrite=True)
        reader.communicate("go\n", timeout=120)
        assert reader.returncode == 0, reader.stderr[-2000:]
    finally:
        if reader.poll() is None:
            reader.kill()
    read = np.load(tmp_path / "read.npy")
    assert len(read) == 28 and {x.tobytes() for x in read} <= old  # only the folder as it was
    assert _write(corpus, out, features=other, overwrite=True)["domain"]["config"]["fmax"] == 4000.0  # now free


_CLAIM = """
import sys
from tfpipe.storage.folder import OutputFolder
folder = OutputFolder(sys.argv[1], "train").__enter__()
folder.claim_index()  # what a prepare holds just before it replaces the folder
print("claimed", flush=True)
sys.stdin.readline()
"""


def test_a_reader_started_while_prepare_rewrites_the_folder_is_refused_naming_it(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", per_class=1)
    out = tmp_path / "s"
    _write(corpus, out)
    writer = subprocess.Popen([sys.executable, "-c", _CLAIM, str(out)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "claimed"
        with pytest.raises(tfpipe.DataError, match=rf"s: a tfpipe prepare \(process {writer.pid} .*\) is rewriting "
                                                   rf"this shard folder; wait for it to finish"):
            tfpipe.build_dataset(out, "eval", None, FEAT)
    finally:
        writer.communicate("\n", timeout=60)
    assert tfpipe.build_dataset(out, "eval", None, FEAT) is not None


def test_this_process_may_rewrite_a_folder_it_read(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", per_class=1)
    out = tmp_path / "s"
    _write(corpus, out)
    assert len(list(tfpipe.build_dataset(out, "eval", None, FEAT))) == 1
    _write(corpus, out, num_shards=2, overwrite=True)  # its own reader lock gives way to its own writer
    assert sum(len(y) for _, y in tfpipe.build_dataset(out, "eval", None, FEAT)) == 3
