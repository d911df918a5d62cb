"""Listing a class folder on a remote store (gs://, s3://, ram://): level by level, each level in parallel.

os.walk's way (list a folder, then ask of every entry whether it is a folder) costs two requests
per file on S3 (a HEAD and a LIST, ~20-50 ms each) one after another: 2,000 files, minutes. Here
an entry named like a domain's file (".wav", ".jpg") is taken as a file without asking; every
other entry is listed as a folder, and the ones that are not folders (a README, a CSV) fail that
listing and are dropped. The listings of one level run in threads (fs.parallel), so a folder of
C classes costs the latency of about 1 + C / threads listings, whatever the number of files.

A folder named like a file ("x.wav/") is not descended into; local folders keep os.walk.
"""

from __future__ import annotations

import errno
from typing import Callable, Optional

from tfpipe.core import filesystem as fs
from tfpipe.errors import DataError


def class_files(root: str, domain_of: Callable[[str], Optional[object]]
                ) -> tuple[list[str], dict[str, dict[str, list[str]]], list[str]]:
    """(classes, {domain name: {class: files}}, stray domain files at the top) of a remote class folder.

    Raises:
      DataError: the folder or one of its subfolders cannot be listed (permission), naming it.
    """
    try:
        names = sorted(fs.listdir(root))
    except OSError as e:
        fs.check_bucket(root)
        raise DataError(f"{root}: cannot list the folder ({e.strerror}); fix its permissions or the path") from None
    stray = [fs.join(root, n) for n in names if domain_of(n)]
    classes: list[str] = []
    by_domain: dict[str, dict[str, list[str]]] = {}
    candidates = [(n, fs.join(root, n)) for n in names if not domain_of(n) and not n.startswith(".")]
    top = True
    while candidates:  # one level of folders per round, listed in threads
        deeper = []
        for (name, folder), children in zip(candidates, fs.parallel(_children, candidates, remote=True)):
            if children is None:
                continue  # not a folder (a README, a CSV): nothing of it is read
            if top:
                classes.append(name)
            for child in sorted(children):
                domain = domain_of(child)
                if domain:
                    by_domain.setdefault(domain.name, {}).setdefault(name, []).append(fs.join(folder, child))
                elif not child.startswith("."):
                    deeper.append((name, fs.join(folder, child)))
        candidates, top = deeper, False
    return classes, by_domain, stray


def _children(entry: tuple[str, str]) -> Optional[list[str]]:
    """The names in the folder entry[1], or None when it is not a folder.

    Raises:
      DataError: a folder that cannot be listed (permission): its files would be left out.
    """
    try:
        return fs.listdir(entry[1])
    except OSError as e:
        if e.errno == errno.EACCES:
            raise DataError(f"{entry[1]}: cannot list the folder ({e.strerror}), so its files would be left out; "
                            f"fix its permissions or move it out of the data folder") from None
        return None
