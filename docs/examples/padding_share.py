"""Padding with and without length buckets, on whole clips of varying length (README, "Measured").

Writes N wav clips of 0.2-4 s (log-uniform lengths, 4 classes) once, then reads one epoch of
whole clips (AudioConfig(clip_seconds=0)) with one padded_batch and with bucket_boundaries, and
prints the share of the batches' log-mel frames that are padding, and the epoch's time.

    python docs/examples/padding_share.py /tmp/m/varlen [N=800] [BATCH=32] [BOUNDARIES=50,100,200]
"""

import os
import sys
import time

import numpy as np

import tfpipe


def write_clips(folder: str, n: int, seed: int = 0) -> None:
    import soundfile as sf

    rng = np.random.default_rng(seed)
    for i in range(n):
        path = os.path.join(folder, f"c{i % 4}", f"clip{i:05d}.wav")
        if os.path.exists(path):
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        seconds = float(np.exp(rng.uniform(np.log(0.2), np.log(4.0))))
        t = np.arange(int(seconds * 16000)) / 16000
        sf.write(path, (0.3 * np.sin(2 * np.pi * (200 + 100 * (i % 4)) * t)).astype(np.float32), 16000,
                 subtype="PCM_16")


def padding_share(folder: str, batch: int, boundaries: tuple) -> tuple[float, float, int]:
    pipe = tfpipe.PipelineConfig.optimized(batch_size=batch, seed=0, drop_remainder=False,
                                           bucket_boundaries=boundaries)
    ds = tfpipe.build_dataset(folder, "train", pipe, tfpipe.AudioConfig(clip_seconds=0), epochs=1)
    padded = total = batches = 0
    start = time.perf_counter()
    for features, _ in ds.as_numpy_iterator():
        frames = features["log_mel"]
        real = (np.abs(frames).sum(axis=2) > 0).sum()
        total += frames.shape[0] * frames.shape[1]
        padded += frames.shape[0] * frames.shape[1] - real
        batches += 1
    return padded / total, time.perf_counter() - start, batches


if __name__ == "__main__":
    tfpipe.quiet()
    folder = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 800
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    bounds = tuple(int(b) for b in (sys.argv[4] if len(sys.argv) > 4 else "50,100,200").split(","))
    write_clips(folder, n)
    for name, b in (("one padded_batch", ()), (f"bucket_boundaries={','.join(map(str, bounds))}", bounds)):
        share, seconds, batches = padding_share(folder, batch, b)
        print(f"{name:32s} padding {share:6.1%} of the frames, {batches} batches, epoch {seconds:.1f} s")
