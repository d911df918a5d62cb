"""Paths anywhere tf.io.gfile reaches: local files through `os` (fast), the rest through tf.io.gfile.

A path with a scheme (`gs://bucket/x`, `s3://bucket/x`, `ram://x`, `hdfs://...`) is remote:
every operation on it goes through tf.io.gfile, whose filesystems TensorFlow's own readers
(TFRecordDataset, read_file) use too. A local path keeps the `os` calls it always had: the
same speed (listing 2,000 files), the same errors (errno, strerror) and permissions.

Remote errors come back as OSError (errno ENOENT, EACCES, EIO) naming the path, so callers
handle both kinds alike. `s3://` is registered on first sight (tensorflow-io, the `s3` extra),
after a check that AWS credentials exist and the endpoint answers: without them the AWS SDK
retries each request for about 25 s, so every listing would hang instead of failing.
"""

from __future__ import annotations

import concurrent.futures
import errno
import io
import os
import shutil
import stat as stat_lib
from typing import IO, Callable, Iterable, NamedTuple, Optional, Sequence, TypeVar

from tfpipe.core.gfile_io import GFileIO, TextWriter, as_os_error
from tfpipe.core.paths import (OBJECT_STORES, abspath, bucket, common_folder, dirname, is_remote, join,  # noqa: F401
                               local, normjoin, realpath, relpath, scheme, store_name)
from tfpipe.errors import DataError

T = TypeVar("T")
# Stores whose rename is one atomic step; on the others (object stores) rename is copy + delete,
# and an object appears whole when its writer closes it (see writes_in_place).
_ATOMIC_RENAME = ("", "file", "ram", "hdfs", "viewfs")
REMOTE_THREADS = 16  # requests in flight when listing or checking remote files (each waits ~10-50 ms)
_HEAD_BYTES = 1 << 20  # 1 MiB: read_head's one request holds most media files whole
_registered: set[str] = set()


# --- registration and errors ----------------------------------------------------------------------

def gfile(path: str):
    """tf.io.gfile, with the filesystem of `path`'s scheme registered (s3: tensorflow-io)."""
    import tensorflow as tf  # loaded on the first remote path only: local paths never need it here

    kind = scheme(path)
    if kind and kind not in _registered:
        setup = _SETUP.get(kind)
        if setup is not None:
            setup(path)
        _registered.add(kind)
    return tf.io.gfile


def register(path: str) -> None:
    """Makes `path`'s store usable by TensorFlow in this process (s3://: imports tensorflow-io), once.

    For paths tfpipe hands to TensorFlow without touching them first (an Estimator's model_dir).

    Raises:
      DataError: s3:// without tensorflow-io, credentials or a reachable endpoint (one line).
    """
    if is_remote(path):
        gfile(path)


def _setup_s3(path: str) -> None:
    """Registers s3:// (tensorflow-io), after checking what would otherwise hang or fail deep inside."""
    try:
        import tensorflow_io  # noqa: F401  (importing it registers s3://)
    except ImportError:
        raise DataError(f"{path}: s3:// paths need tensorflow-io: pip install tfpipe[s3]") from None
    from tfpipe.core import s3_checks

    s3_checks.check_before_first_use(path)


_SETUP: dict[str, Callable[[str], None]] = {"s3": _setup_s3}


def _remote(path: str, op: Callable[..., T], *args) -> T:
    """op(*args) through gfile; TensorFlow's errors raised as OSError naming `path`."""
    import tensorflow as tf

    gfile(path)
    try:
        return op(*args)
    except tf.errors.OpError as e:
        raise as_os_error(e, path) from None


# --- questions ------------------------------------------------------------------------------------

class Stat(NamedTuple):
    """What tfpipe asks of a file: its size, modification time (ns), and whether it is a folder / a regular file."""

    size: int
    mtime_ns: int
    is_dir: bool
    regular: bool = True


def stat(path: str) -> Stat:
    """os.stat for a local path, gfile.stat for a remote one (OSError when it is missing)."""
    if not is_remote(path):
        st = os.stat(local(path))
        return Stat(st.st_size, st.st_mtime_ns, stat_lib.S_ISDIR(st.st_mode), stat_lib.S_ISREG(st.st_mode))
    found = _remote(path, lambda: gfile(path).stat(path))
    return Stat(int(found.length), int(found.mtime_nsec), bool(found.is_directory), not found.is_directory)


def exists(path: str) -> bool:
    return os.path.exists(local(path)) if not is_remote(path) else _remote_yes(path, "exists")


def isdir(path: str) -> bool:
    return os.path.isdir(local(path)) if not is_remote(path) else _remote_yes(path, "isdir")


def _remote_yes(path: str, question: str) -> bool:
    """gfile.<question>(path); False where the store cannot answer (as os.path's questions do)."""
    try:
        return _remote(path, getattr(gfile(path), question), path)
    except OSError:
        return False


def isfile(path: str) -> bool:
    if not is_remote(path):
        return os.path.isfile(local(path))
    try:
        return not stat(path).is_dir
    except OSError:
        return False


def getsize(path: str) -> int:
    return stat(path).size


def listdir(path: str) -> list[str]:
    """The names in a folder (OSError when it is not one)."""
    if not is_remote(path):
        return os.listdir(local(path))
    return [n.rstrip("/") for n in _remote(path, gfile(path).listdir, path)]


def glob(pattern: str) -> list[str]:
    """The paths matching a pattern (local: Python's glob, with ** recursive; remote: gfile.glob)."""
    if not is_remote(pattern):
        import glob as glob_lib

        return glob_lib.glob(local(pattern), recursive=True)
    return _remote(pattern, gfile(pattern).glob, pattern)


def parallel(fn: Callable[[T], object], items: Sequence[T], *, remote: Optional[bool] = None) -> list:
    """[fn(i) for i in items], in REMOTE_THREADS threads when they touch a remote store (their requests overlap).

    gfile releases the GIL while it waits on the store, so the threads' waits overlap. Local
    paths keep the plain loop: the disk answers in microseconds and threads would only add cost.

    Args:
      remote: whether fn reaches a remote store; default: whether the first item is a remote path.
    """
    if remote is None:
        remote = bool(items) and isinstance(items[0], (str, os.PathLike)) and is_remote(items[0])
    if len(items) < 2 or not remote:
        return [fn(i) for i in items]
    with concurrent.futures.ThreadPoolExecutor(min(REMOTE_THREADS, len(items))) as pool:
        return list(pool.map(fn, items))


def check_bucket(path: str) -> None:
    """DataError (one line) when `path` is on an object store whose bucket does not exist or cannot be seen."""
    root = bucket(path)
    if root and not isdir(root + "/"):
        raise DataError(f"{path}: the {store_name(path)} bucket {root} does not exist, or these credentials "
                        f"cannot see it; create it or fix the path")


# --- reading ----------------------------------------------------------------------------------------

def open(path: str, mode: str = "r", **kwargs) -> IO:  # pylint: disable=redefined-builtin
    """builtins.open for a local path; tf.io.gfile.GFile for a remote one (text modes decode UTF-8)."""
    if not is_remote(path):
        import builtins

        return builtins.open(local(path), mode, **kwargs)
    if "b" in mode:
        return GFileIO(_remote(path, gfile(path).GFile, path, mode), path)
    raw = GFileIO(_remote(path, gfile(path).GFile, path, mode.replace("t", "") + "b"), path)
    if "r" in mode:
        return io.TextIOWrapper(io.BytesIO(raw.read()), encoding=kwargs.get("encoding") or "utf-8",
                                newline=kwargs.get("newline"))
    return TextWriter(raw, kwargs.get("encoding") or "utf-8")


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def read_head(path: str) -> tuple[IO[bytes], int]:
    """A seekable reader of a file to scan, and its size. Raises OSError (a pipe or device: ESPIPE).

    Local: the open file (its size from fstat; a FIFO or device would block a scan forever).
    Remote: one request for the first MiB, which holds most wav and image files whole (the
    size is then what came back, with no stat request); a larger file is read through gfile.
    """
    if not is_remote(path):
        st = os.stat(local(path))  # before opening: opening a FIFO would wait for a writer forever
        if not stat_lib.S_ISREG(st.st_mode):
            raise OSError(errno.ESPIPE, "not a regular file (a pipe, device or socket)", path)
        return open(path, "rb"), st.st_size
    f = open(path, "rb")
    head = f.read(_HEAD_BYTES)
    if len(head) < _HEAD_BYTES:
        f.close()
        return io.BytesIO(head), len(head)
    f.seek(0)
    return f, getsize(path)


# --- writing ----------------------------------------------------------------------------------------

def makedirs(path: str) -> None:
    """Creates a folder and its parents; nothing on an object store, whose folders are key prefixes."""
    if not is_remote(path):
        os.makedirs(local(path), exist_ok=True)
    elif not writes_in_place(path):
        _remote(path, gfile(path).makedirs, path)


def remove(path: str) -> None:
    if not is_remote(path):
        os.remove(local(path))
    else:
        _remote(path, gfile(path).remove, path)


def rmtree(path: str) -> None:
    """Removes a folder and everything in it; nothing when it is not there.

    On an object store each object is deleted (in threads); tensorflow-io's own recursive delete
    hung there, after its last request, in a test against a real S3 server.
    """
    if not is_remote(path):
        shutil.rmtree(local(path), ignore_errors=True)
    elif not writes_in_place(path):
        try:
            _remote(path, gfile(path).rmtree, path)
        except OSError:
            pass
    else:
        _remove_objects(path)


def _remove_objects(folder: str) -> None:
    try:
        children = [join(folder, name) for name in listdir(folder)]
    except OSError:
        return  # not there (any more)
    folders = parallel(isdir, children, remote=True)
    parallel(lambda i: _remove_objects(children[i]) if folders[i] else remove(children[i]), range(len(children)),
             remote=True)
    try:
        remove(folder.rstrip("/") + "/")  # the empty "folder/" object a gfile.makedirs may have left
    except OSError:
        pass


def rename(src: str, dst: str) -> None:
    """Replaces dst with src (os.replace locally; on an object store a copy and a delete)."""
    if not is_remote(src):
        os.replace(local(src), local(dst))
    else:
        _remote(dst, gfile(src).rename, src, dst, True)


def renames_atomically(path: str) -> bool:
    """True where a rename into `path`'s folder is one atomic step (local disk, ram://, HDFS)."""
    return scheme(path) in _ATOMIC_RENAME


def writes_in_place(path: str) -> bool:
    """True on an object store: an object appears whole, or not at all, when its writer closes it.

    So a shard or index is written under its final name there (a temp name and a rename would
    copy every byte again, and the rename is not atomic anyway).
    """
    return scheme(path) in OBJECT_STORES


def fsync_dir(path: str) -> None:
    """Makes renames inside a local folder durable (an object store's writes are durable when closed)."""
    if is_remote(path):
        return
    fd = os.open(local(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str, data: bytes, tmp_dir: Optional[str] = None) -> None:
    """Readers see the old file or the whole new one: temp name, fsync, rename; in place on an object store.

    Raises:
      OSError: the write failed (the temp file is removed).
    """
    if writes_in_place(path):
        with open(path, "wb") as f:
            f.write(data)
        return
    tmp = join(tmp_dir or dirname(path), f".{os.path.basename(path)}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            if not is_remote(tmp):
                f.flush()
                os.fsync(f.fileno())
        rename(tmp, path)
    finally:
        if exists(tmp):
            remove(tmp)
    fsync_dir(dirname(path))


def first_missing(paths: Iterable[str]) -> list[str]:
    """The paths that are not files, checked in parallel for remote ones."""
    paths = list(paths)
    return [p for p, ok in zip(paths, parallel(isfile, paths)) if not ok]
