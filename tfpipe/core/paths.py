"""Path strings for local and remote files: what a path names, without asking any store.

A path with a scheme (`gs://bucket/x`, `s3://bucket/x`, `ram://x`, `hdfs://...`) is remote;
os.path would treat it as a relative local path ("s3:/b" after normpath, the cwd in front
after abspath). These functions keep the scheme and bucket and leave local paths to os.path.
"""

from __future__ import annotations

import os
import posixpath
import re
from typing import Sequence

SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
OBJECT_STORES = {"s3": "S3", "gs": "Google Cloud Storage"}


def scheme(path: str) -> str:
    """"s3", "gs", "ram", ... of a remote path; "" for a local one ("file://" paths are local too)."""
    match = SCHEME.match(os.fspath(path)) if isinstance(path, (str, os.PathLike)) else None
    return "" if match is None or match.group(1).lower() == "file" else match.group(1).lower()


def is_remote(path: str) -> bool:
    """True for a path with a scheme that tf.io.gfile serves (gs://, s3://, ram://, hdfs://)."""
    return bool(scheme(path))


def store_name(path: str) -> str:
    """How a message names the store: "S3", "Google Cloud Storage", "ram://", "the local disk"."""
    kind = scheme(path)
    return OBJECT_STORES.get(kind, f"{kind}://" if kind else "the local disk")


def local(path: str) -> str:
    """A local path without a file:// prefix (unchanged otherwise)."""
    path = os.fspath(path)
    return path[len("file://"):] if path.lower().startswith("file://") else path


def abspath(path) -> str:
    """os.path.abspath for a local path; a remote one as given, its slashes tidied (never joined to the cwd)."""
    path = os.fspath(path)
    if not is_remote(path):
        return os.path.abspath(local(path))
    head = SCHEME.match(path).group(0)
    rest = posixpath.normpath("/" + path[len(head):]).lstrip("/")
    return _bucket_root(head + ("" if rest == "." else rest))


def _bucket_root(path: str) -> str:
    """An object store's bucket keeps its slash ("s3://b/"): tensorflow-io reads "s3://b" as no bucket at all."""
    if scheme(path) in OBJECT_STORES and "/" not in path[len(SCHEME.match(path).group(0)):]:
        return path + "/"
    return path


def join(path: str, *names: str) -> str:
    return os.path.join(path, *names) if not is_remote(path) else posixpath.join(path, *names)


def dirname(path: str) -> str:
    """The folder of `path`; a remote path never loses its scheme and bucket ("s3://b/x" -> "s3://b/")."""
    if not is_remote(path):
        return os.path.dirname(path)
    head = SCHEME.match(path).group(0)
    rest = path[len(head):].rstrip("/")
    return _bucket_root(head + rest.rpartition("/")[0] if "/" in rest else head + rest)


def normjoin(base: str, name: str) -> str:
    """base/name with ".." resolved; a name that is itself absolute or remote stands alone."""
    if is_remote(name):
        return abspath(name)
    if not is_remote(base):
        return os.path.normpath(os.path.join(base, name))
    return abspath(posixpath.join(base, name))


def relpath(path: str, start: str) -> str:
    if not is_remote(path):
        return os.path.relpath(path, start)
    prefix = start.rstrip("/") + "/"
    return path[len(prefix):] if path.startswith(prefix) else path


def common_folder(paths: Sequence[str]) -> str:
    """The deepest folder holding every path ("DATA" for none), for messages that name the user's folder."""
    if not paths:
        return "DATA"
    if not is_remote(paths[0]):
        return os.path.commonpath([os.path.dirname(p) for p in paths])
    folders = [dirname(p).split("/") for p in paths]
    common = folders[0]
    for parts in folders[1:]:
        common = common[:next((i for i, (a, b) in enumerate(zip(common, parts)) if a != b), min(len(common),
                                                                                               len(parts)))]
    return "/".join(common)


def realpath(path: str) -> str:
    """os.path.realpath (links resolved) for a local path; a remote path as abspath gives it."""
    return abspath(path) if is_remote(path) else os.path.realpath(path)


def bucket(path: str) -> str:
    """"s3://bucket" of an object-store path ("" for other paths)."""
    if scheme(path) not in OBJECT_STORES:
        return ""
    head = SCHEME.match(path).group(0)
    return head + path[len(head):].split("/", 1)[0]
