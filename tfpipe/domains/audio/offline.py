"""Offline audio: decode any wav soundfile reads, resample, crop, featurize in batches.

Shard writers run this in worker processes: every clip is decoded with soundfile (any
PCM width, float, stereo mixed to mono), resampled with soxr when its rate differs,
cropped/padded, and featurized 16 clips at a time by the same `ops.compute_features`
code the online pipeline runs, so shards and the online path agree.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import re
from typing import Sequence

import numpy as np

from tfpipe.core import filesystem as fs
from tfpipe.core.domain import Offline, Schema
from tfpipe.domains.audio.config import STORES, AudioConfig
from tfpipe.errors import DataError

_RESAMPLE_MARGIN_SECONDS = 0.05  # read past the crop so the resampler's filter sees real samples
# libsndfile's log line for a data chunk longer than the file: "data : 32000 (should be 15978)".
_SHORT_DATA = re.compile(r"^data\s*:\s*(\d+)\s*\(should be (\d+)\)", re.MULTILINE)
_STREAMED_SIZES = (0, 0xFFFFFFFF)  # "length unknown" markers written by streaming recorders


def load_clip(path: str, features: AudioConfig, notes: "collections.Counter | None" = None) -> np.ndarray:
    """Decodes any wav soundfile reads, mixed to mono, resampled and cropped to features' clip.

    Args:
      path: the file.
      features: sample rate and clip length.
      notes: if given, counts "resampled", "mixed_to_mono", "cropped" and "padded" clips.

    Returns:
      float32 [<= features.num_samples] (shorter clips are zero-padded when batched).

    Raises:
      DataError: empty, truncated or unreadable file, naming it.
    """
    import soundfile

    try:  # opened by Python: the OS's reason ("Permission denied"), not libsndfile's "System error."
        raw, size = fs.read_head(path)  # a remote file's bytes come through tf.io.gfile
    except OSError as e:
        raise DataError(f"{path}: unreadable ({e.strerror or e}); check that it exists and that its permissions "
                        f"let this user read it") from e
    with raw:
        try:
            if size == 0:
                raise DataError(f"{path}: empty file (0 bytes); remove it or copy it again")
            with soundfile.SoundFile(raw) as f:  # one open for header checks and samples
                short = _SHORT_DATA.search(f.extra_info or "")
                if short and int(short.group(1)) not in _STREAMED_SIZES:
                    raise DataError(f"{path}: truncated: the header promises {short.group(1)} bytes of samples "
                                    f"but the file holds {short.group(2)}; copy or export it again")
                if f.frames == 0:
                    raise DataError(f"{path}: empty: no samples; remove it or record it again")
                rate, frames = f.samplerate, f.frames
                wanted = math.ceil(features.clip_seconds * rate)
                if rate != features.sample_rate:
                    wanted += math.ceil(_RESAMPLE_MARGIN_SECONDS * rate)
                samples = f.read(frames=min(wanted, frames), dtype="float32", always_2d=True)
        except (RuntimeError, OSError) as e:  # soundfile's errors subclass RuntimeError
            why = getattr(e, "error_string", None) or getattr(e, "strerror", None) or e  # without the path
            raise DataError(f"{path}: not readable audio ({why}); remove it or convert it to wav") from e
    mono = samples.mean(axis=1) if samples.shape[1] > 1 else samples[:, 0]
    if rate != features.sample_rate:
        import librosa

        mono = librosa.resample(mono, orig_sr=rate, target_sr=features.sample_rate, res_type="soxr_hq")
    if notes is not None:
        seconds = frames / rate
        notes["resampled"] += rate != features.sample_rate
        notes["mixed_to_mono"] += samples.shape[1] > 1
        notes["cropped"] += seconds > features.clip_seconds + 0.5 / features.sample_rate
        notes["padded"] += seconds < features.clip_seconds - 0.5 / features.sample_rate
    return np.ascontiguousarray(mono[:features.num_samples], np.float32)


def pad_clips(clips: Sequence[np.ndarray], num_samples: int) -> np.ndarray:
    """load_clip results as one float32 [len(clips), num_samples] batch, zero-padded like ops.fix_length."""
    batch = np.zeros((len(clips), num_samples), np.float32)
    for row, clip in zip(batch, clips):
        row[:clip.size] = clip  # load_clip crops to num_samples
    return batch


@functools.lru_cache(maxsize=None)
def log_mel_fn(features: AudioConfig):
    """ops.compute_features as one traced function over [batch, samples] (no per-op eager cost)."""
    import tensorflow as tf

    from tfpipe.domains.audio import ops

    log_mel = dataclasses.replace(features, output="log_mel")
    return tf.function(lambda w: ops.compute_features(w, log_mel), autograph=False,
                       input_signature=[tf.TensorSpec([None, features.num_samples], tf.float32)])


class AudioOffline(Offline):
    """load = load_clip; featurize = pad to one batch, then log-mel when that is what is stored."""

    def __init__(self, features: AudioConfig, store: str):
        if store not in STORES:
            raise ValueError(f"store={store!r}: allowed values are {', '.join(map(repr, STORES))}")
        self.features, self.store = features, store
        shape = dataclasses.replace(features, output=store).feature_shape
        self.schema = Schema({store: ("float32", tuple(shape))})
        self._notes: collections.Counter = collections.Counter()

    def load(self, path: str) -> np.ndarray:
        return load_clip(path, self.features, self._notes)

    def featurize(self, loaded: Sequence[np.ndarray]) -> dict:
        batch = pad_clips(loaded, self.features.num_samples)
        if self.store == "log_mel" and len(loaded):
            batch = log_mel_fn(self.features)(batch).numpy()
        return {self.store: batch}

    def warm_up(self) -> None:
        if self.store == "log_mel":
            log_mel_fn(self.features)(np.zeros((1, self.features.num_samples), np.float32))

    def notes(self) -> dict:
        return dict(self._notes)
