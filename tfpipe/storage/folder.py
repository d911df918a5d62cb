"""The output folder of a shard writer: one writer at a time, clean when complete.

While a run is under way its bookkeeping (lock, temp files, per-shard manifests) lives in
the hidden `.tfpipe-work/` subfolder; when the index is written that subfolder is removed,
so a complete folder holds the shards and tfpipe.json only, and a `{split}-*` glob finds
shards only. The index of an earlier run is removed before the first shard is replaced,
so an interrupted rerun never leaves an old index describing new shards.

On an object store (s3://, gs://) there is no rename and no lock: shards and the index are
uploaded under their final names (each object appears whole when its upload completes), the
index last; `.tfpipe-work/lock` names the writer while a run is under way.

Readers and writers meet at tfpipe.json: a process that builds a dataset over the folder
takes a shared lock on it (`hold_for_reading`) and keeps it while the process lives (tf.data
reads the shards in C++ long after build_dataset returned, and an Estimator rebuilds the
dataset at every input_fn call); a writer takes the exclusive lock before it replaces
anything (`OutputFolder.claim_index`), so a rewrite under a live reader is refused, naming it,
instead of mixing old and new examples in that reader.
"""

from __future__ import annotations

import errno
import fcntl
import glob
import os
import socket
from typing import Iterable, Optional

from tfpipe.core import filesystem as fs
from tfpipe.errors import DataError
from tfpipe.storage import index as index_lib
from tfpipe.storage.plan import SHARD_PATTERN

WORK_DIR = ".tfpipe-work"
_LOCK = "lock"
_READING: dict[str, tuple[int, tuple[int, int]]] = {}  # folder -> (fd, index (dev, inode)): held for the process's life


class OutputFolder:
    """Context manager: creates `out_dir`, takes its lock, and cleans up what is no longer needed.

    Raises:
      DataError: another writer holds the folder's lock, naming its process.
    """

    def __init__(self, out_dir: str, split: str):
        self.root = fs.abspath(out_dir)
        self.split = split
        self.work = fs.join(self.root, WORK_DIR)
        self._lock_fd: Optional[int] = None
        self._index_fd: Optional[int] = None

    def __enter__(self) -> "OutputFolder":
        self._created = not fs.exists(self.root)
        try:
            fs.makedirs(self.work)
            if fs.is_remote(self.root):
                return self._enter_remote()
            fd = os.open(os.path.join(self.work, _LOCK), os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:  # a file in the way, no permission, a read-only filesystem
            where = e.filename if isinstance(e.filename, str) else self.root
            raise DataError(f"{self.root}: cannot write the shard folder ({where}: {e.strerror}); pass an --output "
                            f"you can write to (a new folder, or a shard folder)") from None
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

    def _enter_remote(self) -> "OutputFolder":
        """An object store has no lock: the work subfolder's `lock` names the writer (host, process) and,
        while there is no index, tells readers that a prepare is under way (one writer at a time is
        the user's to keep there; BUILD_NOTES "Object stores")."""
        fs.write_atomic(fs.join(self.work, _LOCK), f"{socket.gethostname()} {os.getpid()}".encode())
        self._lock_fd = -1
        for stale in fs.glob(fs.join(self.work, "*.tmp-*")):
            fs.remove(stale)
        return self

    def __exit__(self, *exc) -> None:
        if self._lock_fd is None:
            return
        if fs.isdir(self.work) and fs.listdir(self.work) == [_LOCK]:  # stopped before any shard
            fs.rmtree(self.work)
            if self._created and not fs.listdir(self.root):
                fs.rmtree(self.root)  # a run refused up front leaves nothing behind
        for fd in (self._index_fd, self._lock_fd):
            if fd is not None and fd >= 0:
                os.close(fd)  # releases the flocks
        self._lock_fd = self._index_fd = None

    # --- before writing ------------------------------------------------------------------

    def check_split(self, existing: Optional[dict]) -> None:
        """DataError when the folder holds another split (its index, or its shard files)."""
        others = {m.group("split") for m in map(SHARD_PATTERN.match, fs.listdir(self.root)) if m} - {self.split}
        if existing is not None and existing.get("split") != self.split:
            others.add(existing.get("split"))
        if others:
            raise DataError(f"{self.root}: holds split {', '.join(sorted(map(str, others)))!s} shards, and this run "
                            f"writes split {self.split!r}; one folder holds one split (its tfpipe.json describes "
                            f"one): write each split to its own folder, e.g. {fs.dirname(self.root)}/"
                            f"{self.split}")

    def claim_index(self) -> None:
        """Takes the index's exclusive lock before anything is replaced: refused while a reader holds it.

        Raises:
          DataError: another process reads the folder (it built a dataset over it), naming it.
        """
        path = os.path.join(self.root, index_lib.INDEX_NAME)
        release_reading(self.root)  # this process's own datasets: it is their writer too
        if fs.is_remote(path):
            return  # an object store has no locks: readers check sizes and counts (BUILD_NOTES)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return  # nothing a reader could be reading
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            readers = _describe(lock_holders(os.fstat(fd)))
            os.close(fd)
            raise DataError(f"{self.root}: {readers or 'another process'} is reading this shard folder (it built a "
                            f"dataset over it); rewriting the folder now would mix old and new examples in that "
                            f"reader. Stop it first, or write to another --output") from None
        self._index_fd = fd

    def invalidate_index(self) -> None:
        """Removes tfpipe.json (durably) before any shard is replaced: no reader takes a half-new folder."""
        path = fs.join(self.root, index_lib.INDEX_NAME)
        if fs.exists(path):
            fs.remove(path)
            index_lib.fsync_dir(self.root)

    def remove_strays(self, keep: Iterable[str]) -> list[str]:
        """Removes this split's shards not in `keep` (an earlier --num_shards) and old-layout leftovers."""
        keep = set(keep)
        removed = []
        for name in sorted(fs.listdir(self.root)):
            match = SHARD_PATTERN.match(name)
            legacy = (name.endswith(".tfrecord.json") or (name.startswith(".") and ".tmp-" in name)
                      or name.startswith("tfpipe.part-"))
            if (match and match.group("split") == self.split and name not in keep) or legacy:
                fs.remove(fs.join(self.root, name))
                removed.append(name)
        return removed

    # --- after writing -------------------------------------------------------------------

    def finish(self, index: dict) -> None:
        """Writes tfpipe.json last (atomically), then removes the work subfolder."""
        index_lib.write_json_atomic(fs.join(self.root, index_lib.INDEX_NAME), index, tmp_dir=self.work)
        fs.rmtree(self.work)

    def manifest_path(self, shard_file: str) -> str:
        return fs.join(self.work, shard_file + ".json")


# --- readers -------------------------------------------------------------------------------------

def hold_for_reading(root: str) -> None:
    """Takes a shared lock on `root`'s tfpipe.json, held until this process exits (see the module doc).

    Raises:
      DataError: a tfpipe prepare is rewriting the folder, naming it.
    """
    if fs.is_remote(root):
        return  # an object store has no locks (see OutputFolder._enter_remote)
    key = os.path.realpath(root)
    try:
        fd = os.open(os.path.join(key, index_lib.INDEX_NAME), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return  # no index (or unreadable): reading it fails with its own message
    st = os.fstat(fd)
    held = _READING.get(key)
    if held is not None and held[1] == (st.st_dev, st.st_ino):
        os.close(fd)
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        writer = _describe(lock_holders(st))
        os.close(fd)
        raise DataError(f"{root}: a tfpipe prepare ({writer or 'another process'}) is rewriting this shard folder; "
                        f"wait for it to finish, then build the dataset again") from None
    release_reading(key)  # a lock on an index replaced since protects nothing
    _READING[key] = (fd, (st.st_dev, st.st_ino))


def release_reading(root: str) -> None:
    """Drops this process's read lock on `root` (its writer is about to replace the folder)."""
    held = _READING.pop(fs.realpath(root), None)
    if held is not None:
        os.close(held[0])


def lock_holders(st: os.stat_result) -> list[int]:
    """Processes holding a flock on the file `st` describes, from /proc/locks (Linux; [] elsewhere)."""
    try:
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    pids = []
    for line in lines:  # "1: FLOCK  ADVISORY  READ  1234 08:02:56789 0 EOF" (waiters carry "->")
        parts = line.split()
        if len(parts) < 6 or parts[1] != "FLOCK" or "->" in parts:
            continue
        major, minor, inode = (parts[5].split(":") + ["", "", ""])[:3]
        try:
            if (int(inode), int(major, 16), int(minor, 16)) == (st.st_ino, os.major(st.st_dev), os.minor(st.st_dev)):
                pids.append(int(parts[4]))
        except ValueError:
            continue
    return sorted(set(pids) - {os.getpid()})


def _describe(pids: Iterable[int]) -> str:
    """'process 123 (python train.py)' for each pid, or ''."""
    described = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = " ".join(f.read().replace(b"\0", b" ").decode(errors="replace").split())
        except OSError:
            command = ""
        described.append(f"process {pid}" + (f" ({command[:80]})" if command else ""))
    return ", ".join(described)
