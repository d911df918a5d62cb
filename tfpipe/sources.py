"""Find examples: a wav folder with one subfolder per class, a CSV manifest, or a shard folder.

Also scans wav headers once, up front, so a file the online path cannot read is
reported by name before training starts rather than deep inside a map.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import os
import struct
from typing import Optional, Sequence, Union

from tfpipe.config import FeatureConfig
from tfpipe.errors import DataError

INDEX_NAME = "tfpipe.json"
_MAX_LISTED = 5  # bad files named in one error message


@dataclasses.dataclass(frozen=True)
class Source:
    """Where a dataset's examples are.

    Attributes:
      kind: "wav" (one file per example) or "shards" (TFRecord files + index).
      root: the folder, CSV, or shard folder the user named.
      paths: wav files (kind "wav") or shard files (kind "shards"), absolute.
      labels: label id per wav file; empty for shards (labels are in the records).
      class_names: sorted class names; label id = position in this tuple.
      index: the parsed tfpipe.json of a shard folder.
    """

    kind: str
    root: str
    paths: tuple[str, ...]
    labels: tuple[int, ...]
    class_names: tuple[str, ...]
    index: Optional[dict] = None

    @property
    def num_examples(self) -> int:
        return int(self.index["num_examples"]) if self.kind == "shards" else len(self.paths)

    def subset(self, keep: Sequence[int]) -> "Source":
        """The same source with only the wav files at positions `keep` (class names kept)."""
        if self.kind != "wav":
            raise ValueError("subset() needs a wav source; shard folders are split when written")
        return dataclasses.replace(self, paths=tuple(self.paths[i] for i in keep),
                                   labels=tuple(self.labels[i] for i in keep))

    def split(self, eval_fraction: float) -> tuple["Source", "Source"]:
        """(train, eval) by a hash of each file's path, so a file never changes side between runs."""
        if not 0.0 < eval_fraction < 1.0:
            raise ValueError(f"eval_fraction={eval_fraction!r}: must be between 0 and 1")
        is_eval = [_stable_fraction(os.path.relpath(p, folder(self.root))) < eval_fraction
                   for p in self.paths]
        train = [i for i, e in enumerate(is_eval) if not e]
        held = [i for i, e in enumerate(is_eval) if e]
        if not train or not held:
            raise ValueError(f"{self.root}: {len(self.paths)} files are too few to hold out "
                             f"{eval_fraction:.0%} for eval; pass --eval_data or add files")
        return self.subset(train), self.subset(held)


def find_examples(data: Union[str, os.PathLike, Source]) -> Source:
    """Returns the Source for a wav folder, a CSV manifest, or a shard folder.

    Raises:
      ValueError: the path is missing, empty, or not one of the three layouts.
    """
    if isinstance(data, Source):
        return data
    path = os.path.abspath(os.fspath(data))
    if os.path.isdir(path) and os.path.exists(os.path.join(path, INDEX_NAME)):
        return _shard_folder(path)
    if os.path.isdir(path):
        return _wav_folder(path)
    if os.path.isfile(path) and path.lower().endswith(".csv"):
        return _csv_manifest(path)
    if not os.path.exists(path):
        raise ValueError(f"{path}: no such file or folder")
    raise ValueError(f"{path}: expected a folder with one subfolder of .wav files per class, "
                     f"a CSV manifest (path,label), or a shard folder with {INDEX_NAME}")


def folder(root: str) -> str:
    """The folder a Source's relative names start from: the root folder, or a CSV's folder."""
    return root if os.path.isdir(root) else os.path.dirname(root)


def _stable_fraction(key: str) -> float:
    """A number in [0, 1) fixed by `key` across runs and machines."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2.0 ** 64


def _is_wav(name: str) -> bool:
    return name.lower().endswith(".wav")


def _wav_folder(root: str) -> Source:
    stray = sorted(n for n in os.listdir(root) if _is_wav(n))
    if stray:
        raise ValueError(f"{root}: {os.path.join(root, stray[0])} is not inside a class folder; "
                         f"put each wav under {root}/<class_name>/")
    files_by_class = {}
    for name in sorted(os.listdir(root)):
        class_dir = os.path.join(root, name)
        if not os.path.isdir(class_dir):
            continue
        files = sorted(os.path.join(d, f) for d, _, fs in os.walk(class_dir) for f in fs if _is_wav(f))
        if files:
            files_by_class[name] = files
    return _labelled(root, files_by_class)


def _csv_manifest(csv_path: str) -> Source:
    base = os.path.dirname(csv_path)
    with open(csv_path, newline="") as f:
        reader = csv.DictReader(f)
        columns = reader.fieldnames or []
        if sorted(columns) != ["label", "path"]:
            unknown = sorted(set(columns) - {"path", "label"})
            raise ValueError(f"{csv_path}: columns {columns} but a manifest has exactly 'path,label'"
                             + (f"; unknown columns {unknown}" if unknown else ""))
        rows = [(os.path.normpath(os.path.join(base, r["path"])), r["label"]) for r in reader]
    missing = [p for p, _ in rows if not os.path.isfile(p)]
    if missing:
        raise DataError(f"{csv_path}: {len(missing)} listed files do not exist, e.g. "
                        f"{', '.join(missing[:_MAX_LISTED])}; relative paths resolve against the CSV's folder")
    files_by_class = {}
    for path, label in rows:
        files_by_class.setdefault(label, []).append(path)
    return _labelled(csv_path, dict(sorted(files_by_class.items())))


def _labelled(root: str, files_by_class: dict) -> Source:
    if not files_by_class:
        raise ValueError(f"{root}: no .wav files found; expected one subfolder (or CSV label) per class")
    if len(files_by_class) < 2:
        only = next(iter(files_by_class))
        raise ValueError(f"{root}: only one class ({only!r}); a classifier needs at least two")
    names = tuple(files_by_class)
    paths = tuple(p for c in names for p in files_by_class[c])
    labels = tuple(i for i, c in enumerate(names) for _ in files_by_class[c])
    return Source("wav", root, paths, labels, names)


def _shard_folder(root: str) -> Source:
    index_path = os.path.join(root, INDEX_NAME)
    try:
        with open(index_path) as f:
            index = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"{index_path}: unreadable shard index ({e}); rerun tfpipe prepare") from e
    if index.get("format") != "tfpipe-shards":
        raise DataError(f"{index_path}: not a tfpipe shard index (format={index.get('format')!r})")
    paths = tuple(os.path.join(root, s["file"]) for s in index["shards"])
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise DataError(f"{root}: {len(missing)} shard files listed in {INDEX_NAME} are missing, e.g. "
                        f"{missing[0]}; rerun the same tfpipe prepare command to finish them")
    return Source("shards", root, paths, (), tuple(index["class_names"]), index)


# --- wav headers -------------------------------------------------------------

_PCM = 1
_EXTENSIBLE = 0xFFFE


@dataclasses.dataclass(frozen=True)
class WavLayout:
    """Where the 16-bit PCM samples of each wav file are: byte offset and byte count."""

    offsets: tuple[int, ...]
    sizes: tuple[int, ...]


def scan_wavs(paths: Sequence[str], features: FeatureConfig) -> WavLayout:
    """Checks that each wav is 16-bit PCM mono at features.sample_rate; finds its samples.

    Raises:
      DataError: naming every unusable file (up to a few), what was found, and the fix.
    """
    offsets, sizes, bad = [], [], []
    for path in paths:
        try:
            offset, size = _pcm16_data(path, features.sample_rate)
        except DataError as e:
            bad.append(str(e))
            offset = size = 0
        offsets.append(offset)
        sizes.append(size)
    if bad:
        fix = (f"convert them with `tfpipe prepare --input DATA --output SHARDS "
               f"--sample_rate {features.sample_rate}` (any format, rate, channels) and train on the shards")
        raise DataError(f"{len(bad)} of {len(paths)} wav files cannot be read by the online pipeline, "
                        f"which needs 16-bit PCM mono at {features.sample_rate} Hz:\n  "
                        + "\n  ".join(bad[:_MAX_LISTED])
                        + (f"\n  ... and {len(bad) - _MAX_LISTED} more" if len(bad) > _MAX_LISTED else "")
                        + f"\nFix: {fix}")
    return WavLayout(tuple(offsets), tuple(sizes))


def _pcm16_data(path: str, sample_rate: int) -> tuple[int, int]:
    """(offset, size) of the data chunk of a 16-bit PCM mono wav at `sample_rate`."""
    try:
        with open(path, "rb") as f:
            riff = f.read(12)
            if len(riff) < 12 or riff[:4] != b"RIFF" or riff[8:12] != b"WAVE":
                raise DataError(f"{path}: not a RIFF/WAVE file" + (" (empty file)" if not riff else ""))
            fmt = None
            while True:
                head = f.read(8)
                if len(head) < 8:
                    raise DataError(f"{path}: truncated, no data chunk found")
                chunk_id, chunk_size = head[:4], struct.unpack("<I", head[4:])[0]
                if chunk_id == b"fmt ":
                    fmt = f.read(chunk_size + chunk_size % 2)
                elif chunk_id == b"data":
                    if fmt is None:
                        raise DataError(f"{path}: data chunk before fmt chunk")
                    _check_format(path, fmt, sample_rate)
                    offset = f.tell()
                    available = os.fstat(f.fileno()).st_size - offset
                    size = min(chunk_size, available) // 2 * 2
                    if size == 0:
                        raise DataError(f"{path}: empty (no samples)")
                    return offset, size
                else:
                    f.seek(chunk_size + chunk_size % 2, os.SEEK_CUR)
    except OSError as e:
        raise DataError(f"{path}: unreadable ({e.strerror or e})") from e


def _check_format(path: str, fmt: bytes, sample_rate: int) -> None:
    if len(fmt) < 16:
        raise DataError(f"{path}: malformed fmt chunk")
    tag, channels, rate, _, _, bits = struct.unpack("<HHIIHH", fmt[:16])
    if tag == _EXTENSIBLE and len(fmt) >= 26:
        tag = struct.unpack("<H", fmt[24:26])[0]
    kind = {1: "PCM", 3: "float"}.get(tag, f"format tag {tag:#x}")
    if tag != _PCM or bits != 16:
        raise DataError(f"{path}: {bits}-bit {kind}, not 16-bit PCM")
    if channels != 1:
        raise DataError(f"{path}: {channels} channels, not mono")
    if rate != sample_rate:
        raise DataError(f"{path}: sample rate {rate} Hz, expected {sample_rate} Hz")
