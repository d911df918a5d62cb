"""TFRecord files any writer produced, looked at without TensorFlow: compression, record count, damage.

A TFRecord file is a sequence of records, each `length (uint64) | masked crc32c of length |
data | masked crc32c of data`, optionally inside GZIP or ZLIB. One pass over a file counts
its records and checks every CRC, so a file that is not a TFRecord, is cut short or holds a
damaged record is named (with the record's number) before training starts; the count is
what resuming mid-stream and exact eval need. Counts are remembered in the user's cache
folder, keyed by path, size and modification time, so a file is scanned once.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import os
import struct
import time
import zlib
from typing import IO, Iterable, Optional, Sequence

import google_crc32c

from tfpipe.core import filesystem as fs

COMPRESSIONS = ("", "GZIP", "ZLIB")
SUFFIXES = (".tfrecord", ".tfrecords", ".tfrec", ".record", ".records")  # in a name: a file of TFRecords
_HEADER = 12  # uint64 length + uint32 masked crc
_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True)
class RecordFile:
    """One TFRecord file as scanned: its compression and record count, or what is wrong with it."""

    path: str
    compression: str = ""
    num_records: int = 0
    problem: str = ""


def masked_crc(data: bytes) -> int:
    """TFRecord's masked crc32c."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def detect_compression(head: bytes) -> str:
    """"GZIP", "ZLIB" or "" from a file's first bytes."""
    if head[:2] == _GZIP_MAGIC:
        return "GZIP"
    if len(head) >= 2 and head[0] == 0x78 and (head[0] * 256 + head[1]) % 31 == 0:
        return "ZLIB"
    return ""


def scan(path: str, compression: str = "auto") -> RecordFile:
    """Counts `path`'s records by their headers, checking each length's CRC (data is skipped, not read).

    With "auto", the compression its first bytes suggest is tried, then none (an uncompressed
    file whose first length byte happens to look like a zlib header).
    """
    if compression != "auto":
        return _scan_as(path, compression)
    try:
        with fs.open(path, "rb") as raw:
            guess = detect_compression(raw.read(2))
    except OSError as e:
        return RecordFile(path, "", 0, f"cannot read it ({e.strerror})")
    found = _scan_as(path, guess)
    if found.problem and guess:
        plain = _scan_as(path, "")
        return plain if not plain.problem else found
    return found


def named_as_records(name: str) -> bool:
    """The file's name says it holds TFRecords (train.tfrecord, x.tfrecord.gz, x.tfrec-00001-of-00004)."""
    return any(s in os.path.basename(name).lower() for s in SUFFIXES)


def sniff(path: str) -> Optional[str]:
    """The compression of `path` when its first record header is a TFRecord's (length + its masked
    CRC), else None: a file of records whatever its name (12 bytes read, decompressed if need be)."""
    try:
        with fs.open(path, "rb") as raw:
            guess = detect_compression(raw.read(2))
        for compression in dict.fromkeys((guess, "")):
            with fs.open(path, "rb") as raw:
                header = _open(raw, compression).read(_HEADER)
            if len(header) == _HEADER and masked_crc(header[:8]) == struct.unpack("<I", header[8:])[0]:
                return compression
    except (OSError, EOFError, zlib.error):
        return None
    return None


def first_record(path: str, compression: str) -> Optional[bytes]:
    """The data of `path`'s first record (None: the file holds none, or it cannot be read)."""
    try:
        with fs.open(path, "rb") as raw:
            stream = _open(raw, compression)
            header = stream.read(_HEADER)
            if len(header) < _HEADER:
                return None
            return _read_exactly(stream, struct.unpack("<Q", header[:8])[0])
    except (OSError, EOFError, zlib.error):
        return None


def _scan_as(path: str, compression: str) -> RecordFile:
    try:
        with fs.open(path, "rb") as raw:
            return RecordFile(path, compression, _count(_open(io.BufferedReader(raw, _CHUNK) if fs.is_remote(path)
                                                              else raw, compression), compression))
    except _Damaged as e:
        return RecordFile(path, compression, 0, str(e))
    except (OSError, EOFError, zlib.error) as e:
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        what = f"{compression} data" if compression else "it"
        return RecordFile(path, compression, 0, f"cannot read {what} ({reason})")


class _Damaged(Exception):
    pass


def _open(raw: IO[bytes], compression: str) -> IO[bytes]:
    if compression == "GZIP":
        return gzip.GzipFile(fileobj=raw)
    if compression == "ZLIB":
        return _ZlibReader(raw)
    return raw


def _count(stream: IO[bytes], compression: str) -> int:
    n = 0
    while True:
        header = stream.read(_HEADER)
        if not header:
            return n
        if len(header) < _HEADER:
            raise _Damaged(f"cut short in the header of record {n} ({len(header)} of {_HEADER} bytes)")
        length, crc = struct.unpack("<QI", header)
        if masked_crc(header[:8]) != crc:
            if n == 0:
                hint = " (other compression? pass compression='GZIP' or 'ZLIB')" if not compression else ""
                raise _Damaged(f"not a TFRecord file: its first bytes are not a TFRecord header{hint}")
            raise _Damaged(f"damaged: record {n}'s header fails its CRC check")
        data = _read_exactly(stream, length + 4)
        if data is None:
            raise _Damaged(f"cut short in record {n} (its header says {length} bytes)")
        if masked_crc(data[:-4]) != struct.unpack("<I", data[-4:])[0]:
            raise _Damaged(f"damaged: record {n}'s data fails its CRC check")
        n += 1


def _read_exactly(stream: IO[bytes], size: int) -> Optional[bytes]:
    """`size` bytes, or None when the file ends first."""
    parts, left = [], size
    while left > 0:
        chunk = stream.read(min(left, _CHUNK))
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


class _ZlibReader:
    """A read()-only view of a zlib stream."""

    def __init__(self, raw: IO[bytes]):
        self.raw, self.inflate, self.buffer = raw, zlib.decompressobj(), b""

    def read(self, size: int) -> bytes:
        while len(self.buffer) < size:
            chunk = self.raw.read(_CHUNK)
            if not chunk:
                self.buffer += self.inflate.flush()
                break
            self.buffer += self.inflate.decompress(chunk)
        out, self.buffer = self.buffer[:size], self.buffer[size:]
        return out


class RecordWriter:
    """Writes records in TFRecord framing to a binary file, counting and hashing the bytes as they go.

    The same bytes tf.io.TFRecordWriter writes (uncompressed), without reading the file back to
    hash it: on an object store that would download every shard again.
    """

    def __init__(self, f: IO[bytes]):
        self._f, self._digest, self.bytes = f, hashlib.sha256(), 0

    def write(self, record: bytes) -> None:
        length = struct.pack("<Q", len(record))
        framed = b"".join((length, struct.pack("<I", masked_crc(length)), record,
                           struct.pack("<I", masked_crc(record))))
        self._f.write(framed)
        self._digest.update(framed)
        self.bytes += len(framed)

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()


# --- the count cache ---------------------------------------------------------------------------

def cache_dir() -> str:
    """Where tfpipe remembers things about the user's files: $TFPIPE_CACHE_DIR, else ~/.cache/tfpipe."""
    return os.environ.get("TFPIPE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "tfpipe")


def scan_all(paths: Sequence[str], compression: str = "auto", progress: Optional[callable] = None
             ) -> tuple[list[RecordFile], float, int]:
    """Every file scanned, from the cache where its path, size and mtime match: (files, seconds, scanned).

    Remote files are stat'ed and scanned in threads (fs.parallel): each request waits on the store.
    """
    cache_path = os.path.join(cache_dir(), "record-counts.json")
    cache = _load(cache_path)
    start = time.perf_counter()
    keys = fs.parallel(lambda p: _key(p, compression), list(paths))

    def scan_one(i: int) -> tuple[RecordFile, bool]:
        hit = cache.get(keys[i]) if keys[i] else None
        if hit is not None:
            return RecordFile(paths[i], hit[0], hit[1]), False
        found = scan(paths[i], compression)
        if progress:
            progress(1)
        return found, True

    results = fs.parallel(scan_one, range(len(paths)), remote=bool(paths) and fs.is_remote(paths[0]))
    out = [found for found, _ in results]
    scanned = sum(fresh for _, fresh in results)
    for key, (found, fresh) in zip(keys, results):
        if fresh and key and not found.problem:
            cache[key] = [found.compression, found.num_records]
    if scanned:
        _save(cache_path, cache)
    return out, time.perf_counter() - start, scanned


def _key(path: str, compression: str) -> str:
    try:
        st = fs.stat(path)
    except OSError:
        return ""
    return f"{fs.abspath(path)}|{st.size}|{st.mtime_ns}|{compression}"


def _load(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _save(path: str, cache: dict) -> None:
    """Best effort: a cache that cannot be written only means scanning again next time."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(dict(list(cache.items())[-200_000:]), f)
        os.replace(tmp, path)
    except OSError:
        pass


def files_in(patterns: Iterable[str]) -> list[str]:
    """Paths of the TFRecord files that globs / paths name, sorted within each pattern."""
    out = []
    for pattern in patterns:
        matched = sorted(fs.glob(pattern)) if any(c in pattern for c in "*?[") else [pattern]
        out += [fs.abspath(p) for p in matched]
    return out
