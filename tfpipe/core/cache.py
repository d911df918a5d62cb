"""The chain's cache step: one epoch of examples in memory, in a file, or as a tf.data snapshot.

A snapshot ("snapshot:DIR") outlives the process, so it must never serve data that changed
since it was written: it lives in a subfolder of DIR named by a fingerprint of every file it
was read from (path, size, modification time), and tf.data adds its own key of the dataset
graph (functions, features) below that. A file rewritten in place (same size) has a new
modification time, so the next build reads afresh instead of the stale snapshot.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Sequence

import tensorflow as tf

from tfpipe.errors import DataError

SNAPSHOT = "snapshot:"


def cache(ds: tf.data.Dataset, where: str, inputs: Any) -> tf.data.Dataset:
    """`ds` cached at `where` ("memory", a file path, or "snapshot:DIR"), for the files of `inputs`."""
    if where.startswith(SNAPSHOT):
        folder = where.removeprefix(SNAPSHOT)
        check_space(folder, inputs.paths)
        return ds.snapshot(os.path.join(folder, contents_key(inputs.paths)))
    return ds.cache("" if where == "memory" else where)


def check_space(folder: str, paths: Sequence[str]) -> None:
    """DataError when the snapshot's disk has less room than one pass of the files' bytes needs.

    TensorFlow's snapshot writer fails inside its C++ iterator (ResourceExhaustedError, naming
    no folder), so the check happens here, where the fix can be named.
    """
    import shutil

    needed = 0
    for path in paths:
        try:
            needed += os.stat(path).st_size
        except OSError:
            pass  # contents_key names an unreadable file
    probe = folder
    while probe and not os.path.isdir(probe):
        probe = os.path.dirname(probe.rstrip(os.sep)) or "."
    free = shutil.disk_usage(probe or ".").free
    if free < needed:
        raise DataError(f"{folder}: not enough free space for the snapshot: {_size(free)} free, one pass "
                        f"of the files needs about {_size(needed)}; free space, or use "
                        f"cache='snapshot:OTHER_FOLDER' on a larger disk (or cache='memory')")


def contents_key(paths: Sequence[str]) -> str:
    """A key that changes when any of `paths` is added, removed, resized or rewritten (one stat each).

    Raises:
      DataError: a file cannot be read any more, naming it.
    """
    digest = hashlib.sha256()
    for path in paths:
        try:
            st = os.stat(path)
        except OSError as e:
            raise DataError(f"{path}: cannot read it any more ({e.strerror}); it was listed when the "
                            f"pipeline's files were found") from None
        digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\n".encode("utf-8", "surrogateescape"))
    return "files-" + digest.hexdigest()[:16]


def _size(n: int) -> str:
    """Bytes as a person reads them: 64 KiB, 1.5 GiB."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n} GiB"
