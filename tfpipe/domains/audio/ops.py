"""Pure per-example ops: decode, fix length, log-mel (TF), log-mel (librosa).

Every op takes a single example or a whole batch (leading dims are kept), so the
pipeline can run it before batching or, vectorized, after.
"""

from __future__ import annotations

import functools
from typing import Optional

import numpy as np
import tensorflow as tf

from tfpipe.domains.audio.config import AudioConfig

_PCM16_SCALE = 1.0 / 32768.0  # same scaling as tf.audio.decode_wav and soundfile


def decode_pcm16(contents: tf.Tensor, offset: tf.Tensor, size: tf.Tensor, num_samples: Optional[int]) -> tf.Tensor:
    """Decodes the 16-bit PCM samples at contents[offset:offset+size], cropped or zero-padded.

    Works on one file's bytes (scalar string) or a batch of them, which is what makes
    decoding vectorizable: one decode_raw over the whole batch. num_samples=None: one clip,
    all its samples (whole clips).

    Returns:
      float32 [..., num_samples] in [-1, 1) (float32 [samples] for whole clips).
    """
    if num_samples is None:
        samples = tf.io.decode_raw(tf.strings.substr(contents, offset, size), tf.int16, little_endian=True)
        return tf.cast(samples, tf.float32) * _PCM16_SCALE
    data = tf.strings.substr(contents, offset, tf.minimum(size, 2 * num_samples))
    samples = tf.io.decode_raw(data, tf.int16, little_endian=True, fixed_length=2 * num_samples)
    return tf.cast(samples, tf.float32) * _PCM16_SCALE


def fix_length(waveform: tf.Tensor, num_samples: int) -> tf.Tensor:
    """Crops or zero-pads the last axis to num_samples."""
    waveform = waveform[..., :num_samples]
    pad = num_samples - tf.shape(waveform)[-1]
    paddings = tf.concat([tf.zeros([tf.rank(waveform) - 1, 2], tf.int32), [[0, pad]]], axis=0)
    waveform = tf.pad(waveform, paddings)
    return tf.ensure_shape(waveform, waveform.shape[:-1].concatenate([num_samples]))


@functools.lru_cache(maxsize=None)
def mel_matrix(features: AudioConfig) -> np.ndarray:
    """[n_fft // 2 + 1, n_mels] Slaney mel filters, exactly librosa's defaults."""
    import librosa  # deferred: only needed once per AudioConfig

    return librosa.filters.mel(sr=features.sample_rate, n_fft=features.n_fft, n_mels=features.n_mels,
                               fmin=features.fmin, fmax=features.fmax).T.astype(np.float32)


def log_mel(waveform: tf.Tensor, features: AudioConfig) -> tf.Tensor:
    """log(mel power + offset) in TensorFlow: [..., samples] -> [..., frames, n_mels].

    Centered frames with zero padding and a periodic Hann window, as librosa.
    """
    half = features.n_fft // 2
    paddings = tf.concat([tf.zeros([tf.rank(waveform) - 1, 2], tf.int32), [[half, half]]], axis=0)
    stft = tf.signal.stft(tf.pad(waveform, paddings), frame_length=features.n_fft,
                          frame_step=features.hop_length, fft_length=features.n_fft,
                          window_fn=tf.signal.hann_window, pad_end=False)
    power = tf.math.square(tf.math.real(stft)) + tf.math.square(tf.math.imag(stft))
    mel = tf.tensordot(power, tf.constant(mel_matrix(features)), axes=1)
    return tf.math.log(mel + features.log_offset)


def log_mel_librosa(waveform: np.ndarray, features: AudioConfig) -> np.ndarray:
    """The same features with librosa, in numpy: [..., samples] -> [..., frames, n_mels]."""
    import librosa

    mel = librosa.feature.melspectrogram(y=np.asarray(waveform, np.float32), sr=features.sample_rate,
                                         n_fft=features.n_fft, hop_length=features.hop_length,
                                         n_mels=features.n_mels, fmin=features.fmin, fmax=features.fmax,
                                         center=True, pad_mode="constant", power=2.0)
    return np.log(np.swapaxes(mel, -1, -2) + features.log_offset).astype(np.float32)


def compute_features(waveform: tf.Tensor, features: AudioConfig) -> tf.Tensor:
    """The features AudioConfig asks for, from fixed-length waveforms, with its backend."""
    if features.output == "waveform":
        return waveform
    if features.backend == "librosa":
        out = tf.numpy_function(functools.partial(log_mel_librosa, features=features),
                                [waveform], tf.float32, stateful=False)
        return tf.ensure_shape(out, waveform.shape[:-1].concatenate(features.feature_shape))
    return log_mel(waveform, features)
