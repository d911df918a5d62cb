"""The folder bookkeeping of a generated (synthetic) corpus, shared by every domain's generator.

A corpus folder holds one subfolder per class and a marker file written last: the marker
records what was generated, so the same request finds the folder complete and returns at
once, and a folder without it is unfinished.
"""

from __future__ import annotations

import contextlib
import json
from typing import Iterator, Sequence

from tfpipe.core import filesystem as fs

MARKER = "synth.json"  # written last: its presence means the corpus is complete


def is_complete(out_dir: str, spec: dict) -> bool:
    """True when out_dir holds a finished corpus made from exactly `spec`."""
    try:
        with fs.open(fs.join(out_dir, MARKER), "rb") as f:
            return json.loads(f.read()) == spec
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def writing(out_dir: str, spec: dict, class_names: Sequence[str], what: str) -> Iterator[None]:
    """Around generating a corpus: refuses a folder holding anything else, marks it unfinished
    while the body writes, and marks it complete (atomically) when the body returns.

    Raises:
      ValueError: out_dir holds files or folders that are not part of this corpus.
    """
    if fs.isdir(out_dir):
        foreign = sorted(e for e in fs.listdir(out_dir) if e not in class_names and e != MARKER)
        if foreign:
            raise ValueError(f"{out_dir}: holds {', '.join(foreign[:5])}, which are not part of the synthetic "
                             f"{what}; write it to an empty or new folder")
    marker = fs.join(out_dir, MARKER)
    if fs.exists(marker):
        fs.remove(marker)  # from here until the end the folder is not a complete corpus
    yield
    fs.write_atomic(marker, json.dumps(spec, indent=1).encode())
