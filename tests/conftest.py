"""Shared fixtures: tiny generated wav corpora in temp dirs."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import soundfile as sf  # noqa: E402


def write_tone(path, freq, seconds=0.25, sample_rate=16000, subtype="PCM_16", channels=1, amplitude=0.3):
    """Writes a sine tone (plus a little fixed noise) as a wav file; returns its path."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    t = np.arange(int(seconds * sample_rate)) / sample_rate
    rng = np.random.default_rng(int(freq))
    wave = amplitude * np.sin(2 * np.pi * freq * t) + 0.01 * rng.standard_normal(t.size)
    if channels > 1:
        wave = np.stack([wave] * channels, axis=1)
    sf.write(path, wave.astype(np.float32), sample_rate, subtype=subtype)
    return path


def make_corpus(root, classes=("a", "b", "c"), per_class=4, seconds=0.25, sample_rate=16000):
    """A wav folder with one subfolder per class; file i of class c has a distinct frequency."""
    for ci, name in enumerate(classes):
        for i in range(per_class):
            write_tone(os.path.join(root, name, f"{name}{i:03d}.wav"), 200 + 300 * ci + 17 * i,
                       seconds=seconds, sample_rate=sample_rate)
    return str(root)


@pytest.fixture
def corpus(tmp_path):
    """3 classes x 4 clips of 0.25 s at 16 kHz."""
    return make_corpus(tmp_path / "corpus")


# A write_shards run in its own process, slowed to one clip per chunk and `sleep` seconds a chunk, so a
# test can kill it, or start a second one, while it is inside a shard.
SLOW_WRITER = """
import sys, time
import tfpipe
from tfpipe.storage import shard_job
shard_job._CHUNK_EXAMPLES = 1  # several chunks per shard, so a kill lands inside one
chunk = shard_job._chunk_examples
def slow(*args):
    time.sleep(float(sys.argv[3]))
    return chunk(*args)
shard_job._chunk_examples = slow
tfpipe.write_shards(sys.argv[1], sys.argv[2], num_shards=int(sys.argv[4]), num_workers=0, progress=False,
                    features=tfpipe.FeatureConfig(clip_seconds=0.25), format=sys.argv[5], seed=int(sys.argv[6]))
"""


def start_slow_writer(corpus, out, *, sleep, num_shards, fmt="tfrecord-block", seed=0, **popen):
    """SLOW_WRITER as a subprocess in a session of its own (killable as a group)."""
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-c", SLOW_WRITER, str(corpus), str(out), str(sleep),
                             str(num_shards), fmt, str(seed)], start_new_session=True, **popen)
