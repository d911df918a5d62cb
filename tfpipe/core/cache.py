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
        return ds.snapshot(os.path.join(where.removeprefix(SNAPSHOT), contents_key(inputs.paths)))
    return ds.cache("" if where == "memory" else where)


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
