"""tfpipe.domains.audio.synthetic: a deterministic, valid, learnable corpus; `tfpipe synth`."""

import filecmp
import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from tfpipe.domains.audio import ops, scan, synthetic
from tfpipe.domains.audio.config import AudioConfig


def _wav_files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
                  if f.endswith(".wav"))


def test_layout_counts_and_pcm16_format(tmp_path):
    source = synthetic.write_corpus(tmp_path / "c", per_class=3, sample_rate=8000, clip_seconds=0.5,
                                    progress=False)
    assert source.kind == "wav"
    assert source.class_names == synthetic.CLASS_NAMES
    assert len(source.paths) == 3 * len(synthetic.CLASS_NAMES)
    assert [source.labels.count(i) for i in range(len(source.class_names))] == [3] * len(source.class_names)
    for path, label in zip(source.paths, source.labels):
        info = sf.info(path)
        assert (info.format, info.subtype, info.channels, info.samplerate, info.frames) == \
            ("WAV", "PCM_16", 1, 8000, 4000)
        assert os.path.basename(os.path.dirname(path)) == source.class_names[label]
    # The online pipeline's own header check accepts every file.
    scan.scan_wavs(source.paths, AudioConfig(sample_rate=8000, clip_seconds=0.5))


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = synthetic.write_corpus(tmp_path / "a", per_class=2, seed=7, progress=False)
    b = synthetic.write_corpus(tmp_path / "b", per_class=2, seed=7, progress=False)
    c = synthetic.write_corpus(tmp_path / "c", per_class=2, seed=8, progress=False)
    names = _wav_files(a.root)
    assert names == _wav_files(b.root) == _wav_files(c.root)
    _, mismatch, errors = filecmp.cmpfiles(a.root, b.root, names, shallow=False)
    assert not mismatch and not errors
    _, mismatch, _ = filecmp.cmpfiles(a.root, c.root, names, shallow=False)
    assert len(mismatch) == len(names)


def test_complete_corpus_is_reused_and_a_smaller_one_replaces_it(tmp_path):
    out = tmp_path / "c"
    synthetic.write_corpus(out, per_class=3, progress=False)
    first = os.path.join(out, "tone", "tone_00000.wav")
    os.utime(first, (1, 1))  # a rewrite would reset the mtime
    synthetic.write_corpus(out, per_class=3, progress=False)
    assert os.stat(first).st_mtime == 1
    smaller = synthetic.write_corpus(out, per_class=2, progress=False)
    assert len(_wav_files(out)) == len(smaller.paths) == 2 * len(synthetic.CLASS_NAMES)


def test_refuses_a_folder_holding_other_data(tmp_path):
    (tmp_path / "mine").mkdir()
    with pytest.raises(ValueError, match=r"mine.*not part of the synthetic corpus"):
        synthetic.write_corpus(tmp_path, per_class=1, progress=False)
    with pytest.raises(ValueError, match=r"sample_rate=4000.*>= 8000"):
        synthetic.write_corpus(tmp_path / "x", sample_rate=4000, progress=False)


def test_level_timing_and_noise_vary_and_never_clip():
    rng = np.random.default_rng(0)
    clips = synthetic.generate("tone", 40, 16000, 16000, rng).astype(np.float64) / 32768
    peaks = np.abs(clips).max(axis=1)
    assert peaks.max() <= 0.9 + 1e-4
    assert 20 * np.log10(peaks.max() / peaks.min()) > 15  # levels spread over more than 15 dB
    frames = np.abs(clips).reshape(40, 50, 320).max(axis=2)  # 20 ms frames
    onsets = (frames > 0.5 * peaks[:, None]).argmax(axis=1)
    assert len(set(onsets)) > 10  # events start at many different times
    assert np.all(frames.min(axis=1) > 0)  # background noise everywhere, no digital silence


# --- the classes are what their names say: a rule-based classifier on log-mel tells them apart ------

def _descriptors(log_mel):
    """slope/wobble of the loudest band, level flux, bandwidth and harmonic peaks, over the event."""
    peak = log_mel.max(axis=1)
    floor = np.percentile(peak, 5)
    active = peak > floor + 0.5 * (peak.max() - floor)
    event, t = log_mel[active], np.flatnonzero(active) / 100.0  # 100 frames per second
    band = event.argmax(axis=1).astype(float)
    slope, intercept = np.polyfit(t, band, 1)
    level = event.max(axis=1)
    relative = event - level[:, None]
    spectrum = relative.mean(axis=0)
    inner = spectrum[1:-1]
    return {
        "slope": slope,  # mel bands per second
        "wobble": np.std(band - (slope * t + intercept)),
        "flux": np.mean(np.abs(np.diff(level))),
        "width": np.mean((relative > -np.log(10)).sum(axis=1)),  # bands within 10 dB of the loudest
        "peaks": np.sum((inner > spectrum[:-2]) & (inner > spectrum[2:]) & (inner > spectrum.max() - 2.76)),
    }


def _rule(d):
    if d["width"] > 20:
        return "clicks"
    if d["slope"] > 10:
        return "chirp_up"
    if d["slope"] < -10:
        return "chirp_down"
    if d["wobble"] > 0.7 and d["width"] < 4:
        return "fm_tone"
    if d["peaks"] >= 3 or (d["peaks"] == 2 and d["width"] < 7):
        return "buzz"
    if d["width"] > 4:
        return "noise_band"
    if d["flux"] > 0.3:
        return "am_tone"
    return "tone"


def test_each_class_has_its_defining_pattern(tmp_path):
    source = synthetic.write_corpus(tmp_path / "c", per_class=15, progress=False)
    waves = np.stack([sf.read(p, dtype="float32")[0] for p in source.paths])
    log_mels = ops.log_mel_librosa(waves, AudioConfig())
    predicted = [_rule(_descriptors(m)) for m in log_mels]
    truth = [source.class_names[label] for label in source.labels]
    accuracy = np.mean([p == t for p, t in zip(predicted, truth)])
    per_class = {c: np.mean([p == c for p, t in zip(predicted, truth) if t == c]) for c in source.class_names}
    assert accuracy >= 0.85, per_class
    assert min(per_class.values()) >= 0.6, per_class


def test_cli_synth_writes_the_corpus(tmp_path):
    out = tmp_path / "corpus"
    run = subprocess.run([sys.executable, "-m", "tfpipe.cli", "synth", "--output", str(out),
                          "--per_class", "2", "--seed", "3"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "16 audio files (8 classes x 2" in run.stdout
    assert _wav_files(out) == _wav_files(synthetic.write_corpus(tmp_path / "same", per_class=2, seed=3,
                                                                progress=False).root)
    bad = subprocess.run([sys.executable, "-m", "tfpipe.cli", "synth", "--output", str(out / "tone"),
                          "--per_class", "2"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "not part of the synthetic corpus" in bad.stderr
