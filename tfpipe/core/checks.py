"""check_files: every file checked up front, every bad one named in one error with its fix.

A domain's online path decodes inside tf.data maps, where a bad file would stop training
hours in with a traceback that names nothing. So each domain checks its files once, before
the chain is built: `check_one(path)` returns what the chain needs of the file (a format, an
offset) or raises a FileProblem. This module runs that loop once for every domain, with one
limit on how many files one message names (`tfpipe.errors.listed`).
"""

from __future__ import annotations

import errno
from typing import Any, Callable, Sequence, TypeVar

from tfpipe.core import filesystem as fs
from tfpipe.errors import DataError, listed

T = TypeVar("T")


class FileProblem(DataError):
    """What is wrong with one file ("PATH: reason"); domains subclass it to carry what their fix depends on."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def check_files(paths: Sequence[str], check_one: Callable[[str], T], *, what: str,
                fix: Callable[[Sequence[FileProblem]], str]) -> list[T]:
    """check_one(path) for every path; one DataError listing every file it refused.

    Args:
      paths: the files, in order.
      check_one: path -> what the chain needs of it; raises FileProblem (or OSError, reported
        as "unreadable (reason)") for a file it cannot use.
      what: completes "N of M {what}:", e.g. "wav files cannot be read by the online pipeline,
        which needs 16-bit PCM mono at 16000 Hz".
      fix: the refused files -> the advice that applies to them.

    Returns:
      check_one's result per path, in order.

    Raises:
      DataError: naming every refused file and its reason (the first few, and how many more),
        then "Fix: " and the advice.
    """
    def checked(path: str) -> Any:
        try:
            return check_one(path)
        except FileProblem as e:
            return e
        except OSError as e:  # a file that vanished, a permission, a looping link
            return unreadable(path, e)

    found = fs.parallel(checked, paths)  # remote files in threads: each check waits on the store
    results = [r for r in found if not isinstance(r, FileProblem)]
    bad = [r for r in found if isinstance(r, FileProblem)]
    if bad:
        raise DataError(f"{len(bad)} of {len(paths)} {what}:{listed(bad)}\nFix: {fix(bad)}")
    return results


def open_head(path: str, problem: type = FileProblem) -> tuple[Any, int]:
    """(a seekable reader, the size) of a file to scan (filesystem.read_head), or `problem(path, reason)`:
    a pipe or device (which would block the scan for ever) or the OS's reason it cannot be read."""
    try:
        return fs.read_head(path)
    except OSError as e:
        if e.errno == errno.ESPIPE:
            raise problem(path, "not a regular file (a pipe, device or socket)") from None
        raise problem(path, f"unreadable ({e.strerror or e})") from e


def unreadable(path: str, error: Any) -> FileProblem:
    """The FileProblem of an OSError, with the OS's reason ("Permission denied") and no repeated path."""
    return FileProblem(path, f"unreadable ({getattr(error, 'strerror', None) or error})")
