"""Helpers the tests share: tiny generated wav and image files, a paused shard writer, the repository root.

Fixtures live in conftest.py; plain functions live here so test modules import them by name.
"""

import io
import os
import signal
import struct
import subprocess
import sys
import time
import zlib

import numpy as np
import soundfile as sf
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository


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


# A write_shards run in its own process that stops inside shard `pause` (after its first input) and
# waits there, with `OUT.paused` created, until the test kills it: no timing to guess.
PAUSED_WRITER = """
import sys, time
import tfpipe
from tfpipe.storage import shard_job
corpus, out, num_shards, fmt, seed, pause, overwrite = sys.argv[1:8]
shard_job._CHUNK_EXAMPLES = 1  # one input per chunk, so the pause lands inside a shard
chunk = shard_job._chunk_examples
def paused(job, inputs, *rest):
    if job.spec.index == int(pause) and inputs.start == 1:
        open(out + ".paused", "w").close()
        while True:
            time.sleep(60)
    return chunk(job, inputs, *rest)
shard_job._chunk_examples = paused
tfpipe.write_shards(corpus, out, num_shards=int(num_shards), num_workers=0, progress=False, overwrite=overwrite == "1",
                    features=tfpipe.AudioConfig(clip_seconds=0.25), format=fmt, seed=int(seed))
"""


def start_paused_writer(corpus, out, *, num_shards, pause=1, fmt="tfrecord-block", seed=0, overwrite=False,
                        **popen):
    """PAUSED_WRITER as a subprocess in a session of its own (killable as a group); returns it once paused."""
    marker = f"{out}.paused"
    if os.path.exists(marker):
        os.remove(marker)
    proc = subprocess.Popen([sys.executable, "-c", PAUSED_WRITER, str(corpus), str(out), str(num_shards), fmt,
                             str(seed), str(pause), "1" if overwrite else "0"], start_new_session=True,
                            stderr=subprocess.PIPE, **popen)
    deadline = time.monotonic() + 120
    while not os.path.exists(marker):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the writer never reached shard {pause}: {proc.stderr.read().decode()[-2000:]}")
        time.sleep(0.05)
    return proc


def kill_group(proc):
    """SIGKILLs a process started in a session of its own, and everything it started."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def pattern(height, width, seed=0):
    """uint8 [height, width, 3]: smooth gradients plus a little noise (JPEG-friendly, not flat)."""
    rng = np.random.default_rng(seed)
    ys, xs = np.mgrid[0:height, 0:width]
    base = np.stack([255 * ys / max(1, height - 1), 255 * xs / max(1, width - 1), 128 + 0 * xs], -1)
    return np.clip(base + rng.normal(0, 4, base.shape), 0, 255).astype(np.uint8)


def encode(pixels_or_image, fmt="JPEG", mode=None, **options):
    """Bytes of an image (numpy RGB or PIL) saved as fmt, converted to mode first."""
    image = pixels_or_image if isinstance(pixels_or_image, Image.Image) else Image.fromarray(pixels_or_image)
    if mode:
        image = image.convert(mode)
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def write(path, data):
    """Writes bytes to path (parents created); returns the path as str."""
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def huge_png(path, side=20000):
    """A real, complete side x side grayscale PNG (all black), written row by row: ~0.4 MB on disk,
    side*side*3 bytes if anything decoded it."""
    def chunk(kind, payload):
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    packer, row = zlib.compressobj(9), b"\x00" * (side + 1)  # filter byte + one byte a pixel
    body = b"".join(packer.compress(row) for _ in range(side)) + packer.flush()
    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    return write(path, b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b""))


# `python -c SAYS_IF_TF_LOADED SUBCOMMAND ARGS...` runs `tfpipe SUBCOMMAND ARGS...` and ends its stderr
# with whether TensorFlow was loaded: for what must answer without it (help, flag errors, refusals).
SAYS_IF_TF_LOADED = """
import sys
from tfpipe.cli import main
try:
    main(["tfpipe"] + sys.argv[1:])
finally:
    print("tensorflow loaded" if "tensorflow" in sys.modules else "tensorflow not loaded", file=sys.stderr)
"""


_TINY_TFDS: dict = {}  # TFDS registers a builder class by its name once per process


def tiny_tfds_builder(name: str, train: int = 30, test: int = 9):
    """A tensorflow_datasets builder class called `name` (no download): 3 classes of 8x8 images, image i
    all of value i with label i % 3 and "index" i; `train` and `test` examples. One class per name."""
    if name not in _TINY_TFDS:
        import tensorflow_datasets as tfds

        def _info(self):
            return tfds.core.DatasetInfo(builder=self, supervised_keys=("image", "label"), features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(shape=(8, 8, 3)),
                "label": tfds.features.ClassLabel(names=["cat", "dog", "eel"]),
                "index": tfds.features.Scalar(dtype=np.int64)}))

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples(train), "test": self._generate_examples(test)}

        def _generate_examples(self, n):
            for i in range(n):
                yield i, {"image": np.full((8, 8, 3), i, np.uint8), "label": i % 3, "index": i}

        _TINY_TFDS[name] = type(name, (tfds.core.GeneratorBasedBuilder,), {
            "__doc__": "3 classes of 8x8 images; no download.", "VERSION": tfds.core.Version("1.0.0"),
            "_info": _info, "_split_generators": _split_generators, "_generate_examples": _generate_examples,
            "__module__": __name__})
    return _TINY_TFDS[name]
