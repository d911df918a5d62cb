"""The online wav check: every header is read once, up front, before training starts.

The online path decodes 16-bit PCM mono at the configured rate with one
`tf.io.decode_raw` per batch; this scan finds each file's samples (offset, size) and
names every file that path cannot read, with the fix that applies to it. It also records
each file's size and header bytes, so the read stage can tell, one comparison per file,
that a file was not truncated or replaced after the scan.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import statistics
import struct
import warnings
from typing import Sequence

from tfpipe.core import filesystem as fs
from tfpipe.core.checks import FileProblem, check_files, open_head
from tfpipe.domains.audio.config import AudioConfig

_PCM = 1
_EXTENSIBLE = 0xFFFE
_STREAMED_SIZES = (0, 0xFFFFFFFF)  # "length unknown" markers written by streaming recorders
# A clip is "cropped" when the pipeline drops more than this share of it; when most clips are,
# clip_seconds is probably not what the user meant.
_CROPPED_SHARE = 0.25


@dataclasses.dataclass(frozen=True)
class WavLayout:
    """Where the 16-bit PCM samples of each wav file are, and what the file looked like when scanned.

    Attributes:
      offsets: byte offset of each file's samples (the end of its header).
      sizes: bytes of samples.
      file_sizes: bytes of the whole file.
      headers: each file's bytes before its samples (RIFF, fmt and other chunks).
    """

    offsets: tuple[int, ...]
    sizes: tuple[int, ...]
    file_sizes: tuple[int, ...] = ()
    headers: tuple[bytes, ...] = ()


class _Unusable(FileProblem):
    """One file's problem; `rate`: the only problem is this other sample rate; `convertible`: prepare converts it."""

    def __init__(self, path: str, reason: str, *, rate: int = 0, convertible: bool = False):
        super().__init__(path, reason)
        self.rate, self.convertible = rate, convertible


def scan_wavs(paths: Sequence[str], features: AudioConfig) -> WavLayout:
    """Checks that each wav is 16-bit PCM mono at features.sample_rate; finds its samples.

    Warns (UserWarning) when most clips are longer than features.clip_seconds, naming the
    --clip_seconds that would keep them.

    Raises:
      DataError: naming every unusable file (the first few, and how many more), what was
        found, and the fix for that kind of problem.
    """
    found = check_files(paths, lambda p: _pcm16_data(p, features.sample_rate),
                        what=f"wav files cannot be read by the online pipeline, which needs 16-bit PCM mono "
                             f"at {features.sample_rate} Hz",
                        fix=lambda bad: _fix(bad, paths, features))
    layout = WavLayout(*(tuple(column) for column in zip(*found))) if found else WavLayout((), ())
    _warn_if_mostly_cropped(layout.sizes, features)
    return layout


def _warn_if_mostly_cropped(sizes: Sequence[int], features: AudioConfig) -> None:
    """A UserWarning when more than half the clips lose over a quarter of their samples to the crop."""
    seconds = [size / 2 / features.sample_rate for size in sizes]
    cropped = [s for s in seconds if s * (1 - _CROPPED_SHARE) > features.clip_seconds and not features.whole_clips]
    if len(cropped) * 2 > len(seconds):
        median = round(statistics.median(seconds), 2)
        warnings.warn(f"{len(cropped)} of {len(seconds)} clips are longer than clip_seconds={features.clip_seconds} "
                      f"(median {median} s): the pipeline keeps only the first {features.clip_seconds} s of each; "
                      f"pass --clip_seconds {median} (AudioConfig(clip_seconds={median})) to use more of them",
                      UserWarning, stacklevel=3)


def _fix(bad: Sequence[_Unusable], paths: Sequence[str], features: AudioConfig) -> str:
    """The advice that applies to these problems, with the user's real folder in it."""
    rates = collections.Counter(getattr(e, "rate", 0) for e in bad if getattr(e, "rate", 0))
    if len(bad) == len(paths) and len(rates) == 1 and sum(rates.values()) == len(bad):
        rate = next(iter(rates))  # every file is fine, just at another rate: read them at that rate
        return (f"every file is 16-bit PCM mono at {rate} Hz: pass --sample_rate {rate} "
                f"(AudioConfig(sample_rate={rate})) to read them as they are")
    folder = fs.common_folder(paths)
    advice = []
    if any(getattr(e, "convertible", False) for e in bad):
        # Why the online path refuses what prepare (and estimator_demo, which prepares shards) accepts.
        advice.append(f"convert with `tfpipe prepare --input {folder} --output SHARDS "
                      f"--sample_rate {features.sample_rate}` (any rate, width, channels: resampled and mixed "
                      f"to mono once, offline) and train on SHARDS; the online pipeline decodes raw 16-bit "
                      f"samples inside TensorFlow, which has no resampler, so it does not convert")
    if any(not getattr(e, "convertible", False) for e in bad):
        advice.append("remove or replace the files that are empty, truncated or not audio "
                      "(prepare --on_error=skip lists them instead)")
    return "; ".join(advice)


def _pcm16_data(path: str, sample_rate: int) -> tuple[int, int, int, bytes]:
    """(offset, size, file size, header bytes) of the data chunk of a 16-bit PCM mono wav at `sample_rate`."""
    f, file_size = open_head(path, _Unusable)
    try:
        with f:
            riff = f.read(12)
            if len(riff) < 12 or riff[:4] != b"RIFF" or riff[8:12] != b"WAVE":
                raise _Unusable(path, "not a RIFF/WAVE file" + (" (empty file)" if not riff else ""))
            fmt = None
            while True:
                head = f.read(8)
                if len(head) < 8:
                    raise _Unusable(path, "truncated, no data chunk found")
                chunk_id, chunk_size = head[:4], struct.unpack("<I", head[4:])[0]
                if chunk_id == b"fmt ":
                    fmt = f.read(chunk_size + chunk_size % 2)
                elif chunk_id == b"data":
                    if fmt is None:
                        raise _Unusable(path, "data chunk before fmt chunk")
                    _check_format(path, fmt, sample_rate)
                    offset = f.tell()
                    available = file_size - offset
                    if chunk_size > available and chunk_size not in _STREAMED_SIZES:
                        raise _Unusable(path, f"truncated: the header promises {chunk_size} bytes of samples "
                                              f"but the file holds {available}; copy or export it again")
                    size = min(chunk_size if chunk_size not in _STREAMED_SIZES else available, available) // 2 * 2
                    if size == 0:
                        raise _Unusable(path, "empty (no samples)")
                    f.seek(0)
                    return offset, size, file_size, f.read(offset)
                else:
                    f.seek(chunk_size + chunk_size % 2, os.SEEK_CUR)
    except OSError as e:
        raise _Unusable(path, f"unreadable ({e.strerror or e})") from e


def _check_format(path: str, fmt: bytes, sample_rate: int) -> None:
    if len(fmt) < 16:
        raise _Unusable(path, "malformed fmt chunk")
    tag, channels, rate, _, _, bits = struct.unpack("<HHIIHH", fmt[:16])
    if tag == _EXTENSIBLE and len(fmt) >= 26:
        tag = struct.unpack("<H", fmt[24:26])[0]
    kind = {1: "PCM", 3: "float"}.get(tag, f"format tag {tag:#x}")
    found = []
    if tag != _PCM or bits != 16:
        found.append(f"{bits}-bit {kind}, not 16-bit PCM")
    if channels != 1:
        found.append(f"{channels} channels, not mono")
    if rate != sample_rate:
        found.append(f"sample rate {rate} Hz, expected {sample_rate} Hz")
    if found:
        only_rate = len(found) == 1 and rate != sample_rate
        raise _Unusable(path, "; ".join(found), rate=rate if only_rate else 0, convertible=True)
