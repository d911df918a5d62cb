"""AudioConfig: which log-mel or waveform features the audio domain makes; what its shards store and
what its synthetic corpus takes (no TensorFlow, no numpy: the command line's flags read these)."""

from __future__ import annotations

import dataclasses
from typing import Optional

from tfpipe.config import config_field, validate

STORES = ("log_mel", "waveform")  # what shards may store (the first: the default)


@dataclasses.dataclass(frozen=True)
class AudioConfig:
    """Which features the pipeline computes from each clip.

    The log-mel matches librosa's defaults (Slaney mel scale, Slaney-normalized
    filters, centered periodic-Hann STFT with zero padding, power 2) followed by
    log(mel + log_offset), so the "tf" and "librosa" backends agree.

    Attributes:
      sample_rate: Hz every clip must have (online) or is resampled to (prepare).
      clip_seconds: clips are cropped or zero-padded to this length; 0 keeps whole clips (no
        crop, no pad): examples then vary in length and are padded per batch, or batched by
        length with PipelineConfig.bucket_boundaries (online only; shards store fixed lengths).
      n_fft: FFT size and window length, in samples.
      hop_length: samples between frames.
      n_mels: mel bands.
      fmin: lowest mel band edge, Hz.
      fmax: highest mel band edge, Hz (None: sample_rate / 2).
      log_offset: added before the log so silence stays finite.
      backend: "tf" (in-graph tf.signal) or "librosa" (tf.numpy_function).
      output: "log_mel" features, or the fixed-length "waveform" itself.
    """

    sample_rate: int = config_field(16000, "Sample rate in Hz.", min=1000, max=384000)
    clip_seconds: float = config_field(1.0, "Clip length in seconds (crop or zero-pad); 0: whole clips, of "
                                            "varying length (padded per batch, or --bucket_boundaries).",
                                       min=0.0, max=600.0)
    n_fft: int = config_field(512, "FFT size and window length in samples.", min=16, max=65536)
    hop_length: int = config_field(160, "Samples between STFT frames.", min=1, max=65536)
    n_mels: int = config_field(64, "Number of mel bands.", min=1, max=512)
    fmin: float = config_field(0.0, "Lowest mel frequency in Hz.", min=0.0)
    fmax: Optional[float] = config_field(None, "Highest mel frequency in Hz (default: sample_rate/2).", min=1.0, type=float)
    log_offset: float = config_field(1e-6, "Offset added to mel power before the log.", min=1e-12)
    backend: str = config_field("tf", "Feature code: in-graph 'tf' or 'librosa' via numpy_function.", choices=("tf", "librosa"))
    # Its flag is --features (--output, its old name, is the folder `tfpipe synth` and `prepare` write
    # to); `tfpipe prepare` takes none: --store picks what shards hold.
    output: str = config_field("log_mel", "What the pipeline yields: 'log_mel' or the raw 'waveform'.", choices=("log_mel", "waveform"),
                               flag="features", old_flag="output", prepare=False)

    def __post_init__(self):
        validate(self)
        nyquist = self.sample_rate / 2
        if self.fmax is not None and not self.fmin < self.fmax <= nyquist:
            raise ValueError(f"AudioConfig.fmax={self.fmax!r}: must be in ({self.fmin}, {nyquist}] "
                             f"(above fmin, at most sample_rate/2)")
        if self.fmin >= nyquist:
            raise ValueError(f"AudioConfig.fmin={self.fmin!r}: must be below sample_rate/2 = {nyquist}")
        if 0 < self.clip_seconds < 0.01:
            raise ValueError(f"AudioConfig.clip_seconds={self.clip_seconds!r}: must be 0 (whole clips) or >= 0.01")
        if self.hop_length > self.n_fft:
            raise ValueError(f"AudioConfig.hop_length={self.hop_length}: must be <= n_fft={self.n_fft}")

    @property
    def whole_clips(self) -> bool:
        """clip_seconds=0: every clip as long as it is (examples vary in length)."""
        return self.clip_seconds == 0

    @property
    def num_samples(self) -> Optional[int]:
        """Samples per clip after crop/pad (None: whole clips)."""
        return None if self.whole_clips else int(round(self.sample_rate * self.clip_seconds))

    @property
    def num_frames(self) -> Optional[int]:
        """STFT frames per clip (centered frames, as librosa; None: whole clips)."""
        return None if self.whole_clips else 1 + self.num_samples // self.hop_length

    @property
    def feature_key(self) -> str:
        return self.output

    @property
    def feature_shape(self) -> tuple[int, ...]:
        """Shape of one example's features."""
        if self.output == "waveform":
            return (self.num_samples,)
        return (self.num_frames, self.n_mels)


@dataclasses.dataclass(frozen=True)
class AudioCorpusConfig:
    """What the synthetic audio corpus takes besides its size and seed (`tfpipe synth` flags).

    Attributes:
      sample_rate: Hz of the clips.
      clip_seconds: length of each clip.
    """

    sample_rate: int = config_field(16000, "Sample rate in Hz (at least 8000: the sounds span 90 Hz to 3.6 kHz or "
                                           "more).", min=8000, max=384000)
    clip_seconds: float = config_field(1.0, "Clip length in seconds (events last 40-90% of it).", min=0.5)

    def __post_init__(self):
        validate(self)
