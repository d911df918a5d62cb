"""The output folder of a shard writer: one writer at a time, clean when complete.

While a run is under way its bookkeeping (lock, temp files, per-shard manifests) lives in
the hidden `.tfpipe-work/` subfolder; when the index is written that subfolder is removed,
so a complete folder holds the shards and tfpipe.json only, and a `{split}-*` glob finds
shards only. The index of an earlier run is removed before the first shard is replaced,
so an interrupted rerun never leaves an old index describing new shards.
"""

from __future__ import annotations

import errno
import fcntl
import glob
import os
import shutil
from typing import Iterable, Optional

from tfpipe.errors import DataError
from tfpipe.storage import index as index_lib
from tfpipe.storage.plan import SHARD_PATTERN

WORK_DIR = ".tfpipe-work"
_LOCK = "lock"


class OutputFolder:
    """Context manager: creates `out_dir`, takes its lock, and cleans up what is no longer needed.

    Raises:
      DataError: another writer holds the folder's lock, naming its process.
    """

    def __init__(self, out_dir: str, split: str):
        self.root = os.path.abspath(out_dir)
        self.split = split
        self.work = os.path.join(self.root, WORK_DIR)
        self._lock_fd: Optional[int] = None

    def __enter__(self) -> "OutputFolder":
        self._created = not os.path.exists(self.root)
        os.makedirs(self.work, exist_ok=True)
        fd = os.open(os.path.join(self.work, _LOCK), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise DataError(f"{self.root}: another tfpipe prepare (process {holder}) is writing this "
                                f"folder; wait for it to finish, or write to another --output") from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd = fd
        for stale in glob.glob(os.path.join(self.work, "*.tmp-*")):  # a killed run's; we hold the lock
            os.remove(stale)
        return self

    def __exit__(self, *exc) -> None:
        if self._lock_fd is None:
            return
        if os.path.isdir(self.work) and os.listdir(self.work) == [_LOCK]:  # stopped before any shard
            shutil.rmtree(self.work, ignore_errors=True)
            if self._created and not os.listdir(self.root):
                os.rmdir(self.root)  # a run refused up front leaves nothing behind
        os.close(self._lock_fd)  # releases the flock
        self._lock_fd = None

    # --- before writing ------------------------------------------------------------------

    def check_split(self, existing: Optional[dict]) -> None:
        """DataError when the folder holds another split (its index, or its shard files)."""
        others = {m.group("split") for m in map(SHARD_PATTERN.match, os.listdir(self.root)) if m} - {self.split}
        if existing is not None and existing.get("split") != self.split:
            others.add(existing.get("split"))
        if others:
            raise DataError(f"{self.root}: holds split {', '.join(sorted(map(str, others)))!s} shards, and this run "
                            f"writes split {self.split!r}; one folder holds one split (its tfpipe.json describes "
                            f"one): write each split to its own folder, e.g. {os.path.dirname(self.root)}/"
                            f"{self.split}")

    def invalidate_index(self) -> None:
        """Removes tfpipe.json (durably) before any shard is replaced: no reader takes a half-new folder."""
        path = os.path.join(self.root, index_lib.INDEX_NAME)
        if os.path.exists(path):
            os.remove(path)
            index_lib.fsync_dir(self.root)

    def remove_strays(self, keep: Iterable[str]) -> list[str]:
        """Removes this split's shards not in `keep` (an earlier --num_shards) and old-layout leftovers."""
        keep = set(keep)
        removed = []
        for name in sorted(os.listdir(self.root)):
            match = SHARD_PATTERN.match(name)
            legacy = (name.endswith(".tfrecord.json") or (name.startswith(".") and ".tmp-" in name)
                      or name.startswith("tfpipe.part-"))
            if (match and match.group("split") == self.split and name not in keep) or legacy:
                os.remove(os.path.join(self.root, name))
                removed.append(name)
        return removed

    # --- after writing -------------------------------------------------------------------

    def finish(self, index: dict) -> None:
        """Writes tfpipe.json last (atomically), then removes the work subfolder."""
        index_lib.write_json_atomic(os.path.join(self.root, index_lib.INDEX_NAME), index, tmp_dir=self.work)
        shutil.rmtree(self.work, ignore_errors=True)

    def manifest_path(self, shard_file: str) -> str:
        return os.path.join(self.work, shard_file + ".json")
