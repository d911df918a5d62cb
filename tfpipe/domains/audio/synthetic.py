"""A learnable synthetic audio corpus: the embedded default data of the demo and tests.

Eight classes of sound events, each with random pitch, timing, length, level and
coloured background noise, so a small CNN on log-mel learns them well but a
classifier has to look at the time-frequency pattern, not at a single number:

  tone        steady sine
  chirp_up    exponential sweep up 1-2 octaves
  chirp_down  exponential sweep down 1-2 octaves
  noise_band  band-pass noise (a hiss around a random centre)
  am_tone     sine with deep amplitude modulation (8-20 Hz tremolo)
  fm_tone     sine with frequency modulation (4-9 Hz vibrato, 6-15 % deep)
  clicks      train of short broadband clicks (6-30 per second)
  buzz        harmonic complex on a low fundamental (a sawtooth-like drone)

Every clip is generated with vectorized numpy, a class at a time, and written as
16-bit PCM mono wav under `<out_dir>/<class>/<class>_<i>.wav`, i.e. the wav-folder
layout `tfpipe.find` reads. The same arguments always write the same bytes.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Callable, Union

import numpy as np
import soundfile as sf
from tqdm import tqdm

from tfpipe.core import corpus

if TYPE_CHECKING:
    from tfpipe.core.files import FileSource

CLASS_NAMES = ("am_tone", "buzz", "chirp_down", "chirp_up", "clicks", "fm_tone", "noise_band", "tone")
MARKER = corpus.MARKER
_CHUNK = 50  # clips generated at once: bounds memory (50 x samples float64) and paces the progress bar
_RAMP_SECONDS = 0.01  # event fade in/out, so onsets are not clicks
_BUZZ_HARMONICS = 30
_FILE_PATTERN = re.compile(r"^[a-z_]+_(\d{5})\.wav$")


def write_corpus(out_dir: Union[str, os.PathLike], per_class: int = 250, sample_rate: int = 16000,
                 clip_seconds: float = 1.0, seed: int = 0, progress: bool = True) -> FileSource:
    """`write_files`, then the corpus as a `tfpipe.FileSource` (kind "wav"), class names sorted."""
    from tfpipe.core.source import find  # TensorFlow: only once a Source is asked for

    return find(write_files(out_dir, per_class, sample_rate, clip_seconds, seed, progress))


def write_files(out_dir: Union[str, os.PathLike], per_class: int = 250, sample_rate: int = 16000,
                clip_seconds: float = 1.0, seed: int = 0, progress: bool = True) -> str:
    """Writes the synthetic corpus (one subfolder of wavs per class) and returns the folder.

    numpy and soundfile only, no TensorFlow: `tfpipe synth` starts in a fraction of a second.

    If `out_dir` already holds the corpus these arguments describe (its synth.json
    matches), nothing is rewritten. An interrupted or different earlier corpus in
    the same folder is replaced.

    Args:
      out_dir: folder to write; created if missing. It may hold only this corpus.
      per_class: clips per class.
      sample_rate: Hz; at least 8000 so every class fits below Nyquist.
      clip_seconds: clip length in seconds (at least 0.5: events last 0.4-0.9 of a clip).
      seed: the corpus is a pure function of (seed, per_class, sample_rate, clip_seconds).
      progress: show a tqdm bar.

    Returns:
      out_dir.

    Raises:
      ValueError: bad arguments, or `out_dir` holds folders or files that are not this corpus.
    """
    if per_class < 1:
        raise ValueError(f"per_class={per_class}: must be >= 1")
    if sample_rate < 8000:
        raise ValueError(f"sample_rate={sample_rate}: must be >= 8000 (the sounds need 90 Hz to 3.6 kHz)")
    if clip_seconds < 0.5:
        raise ValueError(f"clip_seconds={clip_seconds}: must be >= 0.5")
    out_dir = os.fspath(out_dir)
    spec = {"format": "tfpipe-synth", "version": 1, "classes": list(CLASS_NAMES), "per_class": per_class,
            "sample_rate": sample_rate, "clip_seconds": clip_seconds, "seed": seed}
    if corpus.is_complete(out_dir, spec):
        return out_dir
    num_samples = int(round(sample_rate * clip_seconds))
    with corpus.writing(out_dir, spec, CLASS_NAMES, "corpus"), \
            tqdm(total=per_class * len(CLASS_NAMES), desc="synth", unit="clip", disable=not progress) as bar:
        for class_id, name in enumerate(CLASS_NAMES):
            class_dir = os.path.join(out_dir, name)
            os.makedirs(class_dir, exist_ok=True)
            _remove_stale(class_dir, per_class)
            for start in range(0, per_class, _CHUNK):
                n = min(_CHUNK, per_class - start)
                rng = np.random.default_rng([seed, class_id, start])
                clips = generate(name, n, sample_rate, num_samples, rng)
                for i, clip in enumerate(clips):
                    sf.write(os.path.join(class_dir, f"{name}_{start + i:05d}.wav"), clip, sample_rate,
                             subtype="PCM_16")
                bar.update(n)
    return out_dir


def generate(name: str, n: int, sample_rate: int, num_samples: int, rng: np.random.Generator) -> np.ndarray:
    """n clips of class `name` as int16 [n, num_samples]: event + background noise, random level.

    Raises:
      ValueError: unknown class name.
    """
    if name not in _EVENTS:
        raise ValueError(f"unknown synthetic class {name!r}: allowed values are {', '.join(CLASS_NAMES)}")
    t = np.arange(num_samples) / sample_rate
    seconds = num_samples / sample_rate
    duration = rng.uniform(0.4, 0.9, (n, 1)) * seconds
    onset = rng.uniform(0.0, 1.0, (n, 1)) * (seconds - duration)
    tau = np.clip(t - onset, 0.0, duration)  # time since the event began, frozen outside it
    ramp = np.minimum(np.clip((t - onset) / _RAMP_SECONDS, 0, 1),
                      np.clip((onset + duration - t) / _RAMP_SECONDS, 0, 1))
    event = _EVENTS[name](tau, duration, sample_rate, rng) * ramp
    on_power = np.mean(event ** 2, axis=1, keepdims=True) * seconds / duration
    event /= np.sqrt(on_power) + 1e-12  # unit RMS while the event sounds
    snr_db = rng.uniform(0.0, 24.0, (n, 1))
    mix = event + _background(n, num_samples, rng) * 10.0 ** (-snr_db / 20.0)
    peak = rng.uniform(0.05, 0.9, (n, 1))  # the level varies 25 dB: a gain-only model cannot cheat
    mix *= peak / np.max(np.abs(mix), axis=1, keepdims=True)
    return np.round(mix * 32767.0).astype(np.int16)


# --- events: (tau [n, samples], duration [n, 1], sample_rate, rng) -> float [n, samples] ---------------

def _log_uniform(rng: np.random.Generator, low: float, high: float, n: int) -> np.ndarray:
    """[n, 1] values spread evenly on a log scale, as pitch is heard."""
    return np.exp(rng.uniform(np.log(low), np.log(high), (n, 1)))


def _top(sample_rate: int) -> float:
    """Highest frequency an event may reach: well below Nyquist, at most 7.2 kHz."""
    return min(7200.0, 0.45 * sample_rate)


def _tone(tau, duration, sr, rng):
    f = _log_uniform(rng, 250.0, _top(sr) / 2, len(tau))
    return np.sin(2 * np.pi * f * tau + rng.uniform(0, 2 * np.pi, f.shape))


def _sweep(tau, duration, sr, rng, up: bool):
    n = len(tau)
    ratio = _log_uniform(rng, 2.0, 4.0, n)  # 1-2 octaves
    low = _log_uniform(rng, 250.0, _top(sr) / ratio.max(), n)
    f0, r = (low, ratio) if up else (low * ratio, 1.0 / ratio)
    # f(tau) = f0 * r**(tau / duration); the phase is its integral.
    phase = 2 * np.pi * f0 * duration / np.log(r) * (r ** (tau / duration) - 1.0)
    return np.sin(phase)


def _noise_band(tau, duration, sr, rng):
    n, samples = tau.shape
    centre = _log_uniform(rng, 400.0, _top(sr) * 0.8, n)
    width = centre * rng.uniform(0.1, 0.3, (n, 1))
    freqs = np.fft.rfftfreq(samples, 1.0 / sr)
    gain = np.exp(-0.5 * ((freqs - centre) / width) ** 2)
    return np.fft.irfft(np.fft.rfft(rng.standard_normal((n, samples))) * gain, n=samples)


def _am_tone(tau, duration, sr, rng):
    n = len(tau)
    rate = rng.uniform(8.0, 20.0, (n, 1))
    depth = rng.uniform(0.8, 1.0, (n, 1))
    return _tone(tau, duration, sr, rng) * (1.0 - depth * 0.5 * (1.0 + np.cos(2 * np.pi * rate * tau)))


def _fm_tone(tau, duration, sr, rng):
    n = len(tau)
    fc = _log_uniform(rng, 500.0, _top(sr) / 2.5, n)
    rate = rng.uniform(4.0, 9.0, (n, 1))
    depth = rng.uniform(0.06, 0.15, (n, 1))
    # f(tau) = fc * (1 + depth * sin(2 pi rate tau)); the phase is its integral.
    phase = 2 * np.pi * fc * tau - fc * depth / rate * np.cos(2 * np.pi * rate * tau)
    return np.sin(phase)


def _clicks(tau, duration, sr, rng):
    n, samples = tau.shape
    rate = rng.uniform(6.0, 30.0, (n, 1))
    decay = rng.uniform(0.001, 0.003, (n, 1))
    since_click = np.mod(tau * rate, 1.0) / rate
    return np.exp(-since_click / decay) * rng.standard_normal((n, samples))


def _buzz(tau, duration, sr, rng):
    n = len(tau)
    f0 = _log_uniform(rng, 90.0, 300.0, n)
    phase = 2 * np.pi * f0 * tau
    out = np.zeros_like(tau)
    for k in range(1, _BUZZ_HARMONICS + 1):
        out += np.sin(k * phase) * ((k * f0 < _top(sr)) / k)  # harmonics above the top are left out
    return out


_EVENTS: dict[str, Callable[..., np.ndarray]] = {
    "tone": _tone,
    "chirp_up": lambda *a: _sweep(*a, up=True),
    "chirp_down": lambda *a: _sweep(*a, up=False),
    "noise_band": _noise_band,
    "am_tone": _am_tone,
    "fm_tone": _fm_tone,
    "clicks": _clicks,
    "buzz": _buzz,
}


def _background(n: int, samples: int, rng: np.random.Generator) -> np.ndarray:
    """Unit-RMS noise whose colour varies from white to pink (power ~ 1/f**alpha, alpha in [0, 1])."""
    spectrum = np.fft.rfft(rng.standard_normal((n, samples)))
    f = np.maximum(np.arange(spectrum.shape[1]), 1.0)
    spectrum *= f ** (-rng.uniform(0.0, 1.0, (n, 1)) / 2)
    noise = np.fft.irfft(spectrum, n=samples)
    return noise / np.sqrt(np.mean(noise ** 2, axis=1, keepdims=True))


# --- the folder ---------------------------------------------------------------------

def _remove_stale(class_dir: str, per_class: int) -> None:
    """Deletes wavs an earlier, larger corpus left in class_dir, so counts match per_class."""
    for entry in os.listdir(class_dir):
        match = _FILE_PATTERN.match(entry)
        if not match or int(match.group(1)) >= per_class:
            os.remove(os.path.join(class_dir, entry))
