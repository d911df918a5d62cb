"""The up-front wav scan: samples found, every bad file named with its fix (why the online path does not
convert, what does), the size and header recorded for the read-time check, too-short clip_seconds noticed."""

import os
import re
import warnings

import numpy as np
import pytest
import soundfile as sf

from tests.support import write_tone
from tfpipe.domains.audio import scan
from tfpipe.domains.audio.config import AudioConfig
from tfpipe.errors import DataError


def test_layout_records_samples_file_size_and_header_bytes(tmp_path):
    paths = [write_tone(str(tmp_path / "a" / f"{i}.wav"), 300 + i, seconds=0.25 + 0.25 * i) for i in range(3)]
    layout = scan.scan_wavs(paths, AudioConfig())
    for path, offset, size, file_size, header in zip(paths, *map(list, (
            layout.offsets, layout.sizes, layout.file_sizes, layout.headers)), strict=True):
        data = open(path, "rb").read()
        assert file_size == len(data) and header == data[:offset] and data[offset - 8:offset - 4] == b"data"
        assert size == 2 * sf.info(path).frames


def test_stereo_or_44k_files_are_refused_saying_why_and_what_converts_them(tmp_path):
    paths = [write_tone(str(tmp_path / "a" / "good.wav"), 300),
             write_tone(str(tmp_path / "a" / "stereo.wav"), 300, channels=2),
             write_tone(str(tmp_path / "a" / "cd.wav"), 300, sample_rate=44100)]
    with pytest.raises(DataError) as error:
        scan.scan_wavs(paths, AudioConfig())
    message = str(error.value)
    assert message.startswith("2 of 3 wav files cannot be read by the online pipeline, which needs 16-bit PCM mono")
    assert "stereo.wav: 2 channels, not mono" in message and "cd.wav: sample rate 44100 Hz" in message
    assert f"tfpipe prepare --input {tmp_path / 'a'} --output SHARDS --sample_rate 16000" in message
    assert "resampled and mixed to mono once, offline" in message and "has no resampler" in message


def test_every_bad_file_is_listed_up_to_the_one_limit(tmp_path):
    paths = [str(tmp_path / "a" / f"{i:02d}.wav") for i in range(13)]
    os.makedirs(tmp_path / "a")
    for p in paths:
        open(p, "wb").write(b"not audio")
    with pytest.raises(DataError) as error:
        scan.scan_wavs(paths, AudioConfig())
    message = str(error.value)
    assert len(re.findall(r"\d\d\.wav: not a RIFF/WAVE file", message)) == 10 and "... and 3 more" in message


def test_mostly_cropped_clips_suggest_clip_seconds(tmp_path):
    long = [write_tone(str(tmp_path / "a" / f"{i}.wav"), 300, seconds=3.0) for i in range(3)]
    short = write_tone(str(tmp_path / "a" / "short.wav"), 300, seconds=1.0)
    with pytest.warns(UserWarning, match=r"3 of 4 clips are longer than clip_seconds=1.0 \(median 3.0 s\).*"
                                         r"--clip_seconds 3.0"):
        scan.scan_wavs(long + [short], AudioConfig())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scan.scan_wavs(long + [short], AudioConfig(clip_seconds=3.0))  # nothing cropped: no warning
        scan.scan_wavs(long[:1] + [short] * 2, AudioConfig())  # a third cropped: not "most"


def _write(path, data, rate, subtype):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    sf.write(path, data, rate, subtype=subtype)
    return path


@pytest.mark.parametrize("kind, found", [
    ("pcm24", r"24-bit PCM, not 16-bit PCM"),
    ("float", r"32-bit float, not 16-bit PCM"),
    ("stereo", r"2 channels, not mono"),
    ("rate", r"sample rate 44100 Hz, expected 16000 Hz"),
    ("empty", r"not a RIFF/WAVE file \(empty file\)"),
    ("text", r"not a RIFF/WAVE file"),
    ("no_samples", r"empty \(no samples\)"),
    ("truncated", r"truncated, no data chunk"),
])
def test_unreadable_wavs_fail_up_front_naming_file_found_and_fix(tmp_path, kind, found):
    x = np.zeros(1600, np.float32)
    path = str(tmp_path / "a" / f"{kind}.wav")
    if kind == "pcm24":
        _write(path, x, 16000, "PCM_24")
    elif kind == "float":
        _write(path, x, 16000, "FLOAT")
    elif kind == "stereo":
        _write(path, np.stack([x, x], 1), 16000, "PCM_16")
    elif kind == "rate":
        _write(path, x, 44100, "PCM_16")
    elif kind == "no_samples":
        _write(path, x[:0], 16000, "PCM_16")
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        content = {"empty": b"", "text": b"hello, not audio", "truncated": b"RIFF\x24\x00\x00\x00WAVEfmt "}[kind]
        open(path, "wb").write(content)
    good = write_tone(str(tmp_path / "a" / "good.wav"), 440)
    with pytest.raises(DataError) as e:
        scan.scan_wavs([good, path], AudioConfig())
    message = str(e.value)
    assert f"{path}: " in message and "good.wav" not in message
    assert "1 of 2 wav files" in message
    assert re.search(found, message), message
    if kind in ("pcm24", "float", "stereo", "rate"):  # prepare converts these: the command names the real folder
        assert f"tfpipe prepare --input {tmp_path / 'a'} --output SHARDS --sample_rate 16000" in message
    else:  # nothing to convert: the advice is to replace the file, not a prepare that would fail too
        assert "tfpipe prepare --input" not in message and "remove or replace" in message


def test_wavs_all_at_another_rate_get_the_one_flag_fix(tmp_path):
    paths = [write_tone(str(tmp_path / "a" / f"{i}.wav"), 440 + 10 * i, sample_rate=22050) for i in range(3)]
    with pytest.raises(DataError, match=r"every file is 16-bit PCM mono at 22050 Hz: pass --sample_rate 22050"):
        scan.scan_wavs(paths, AudioConfig())
    assert len(scan.scan_wavs(paths, AudioConfig(sample_rate=22050)).offsets) == 3


def test_truncated_wav_and_fifo_are_refused_online_not_padded_or_hung(tmp_path):
    good = write_tone(str(tmp_path / "a" / "good.wav"), 440)
    cut = str(tmp_path / "a" / "cut.wav")
    with open(good, "rb") as f:
        open(cut, "wb").write(f.read()[:2000])  # header promises 0.25 s of samples, file holds less
    fifo = str(tmp_path / "a" / "pipe.wav")
    os.mkfifo(fifo)
    with pytest.raises(DataError) as e:
        scan.scan_wavs([good, cut, fifo], AudioConfig())
    assert re.search(r"cut.wav: truncated: the header promises \d+ bytes of samples but the file holds 1956", str(e.value))
    assert "pipe.wav: not a regular file" in str(e.value)
