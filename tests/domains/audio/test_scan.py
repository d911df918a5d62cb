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
