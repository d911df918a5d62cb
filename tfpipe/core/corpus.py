"""The folder bookkeeping of a generated (synthetic) corpus, shared by every domain's generator.

A corpus folder holds one subfolder per class and a marker file written last: the marker
records what was generated, so the same request finds the folder complete and returns at
once, and a folder without it is unfinished.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Iterator, Sequence

MARKER = "synth.json"  # written last: its presence means the corpus is complete


def is_complete(out_dir: str, spec: dict) -> bool:
    """True when out_dir holds a finished corpus made from exactly `spec`."""
    try:
        with open(os.path.join(out_dir, MARKER)) as f:
            return json.load(f) == spec
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def writing(out_dir: str, spec: dict, class_names: Sequence[str], what: str) -> Iterator[None]:
    """Around generating a corpus: refuses a folder holding anything else, marks it unfinished
    while the body writes, and marks it complete (atomically) when the body returns.

    Raises:
      ValueError: out_dir holds files or folders that are not part of this corpus.
    """
    if os.path.isdir(out_dir):
        foreign = sorted(e for e in os.listdir(out_dir) if e not in class_names and e != MARKER)
        if foreign:
            raise ValueError(f"{out_dir}: holds {', '.join(foreign[:5])}, which are not part of the synthetic "
                             f"{what}; write it to an empty or new folder")
    marker = os.path.join(out_dir, MARKER)
    if os.path.exists(marker):
        os.remove(marker)  # from here until the end the folder is not a complete corpus
    yield
    tmp = marker + ".tmp"
    with open(tmp, "w") as f:
        json.dump(spec, f, indent=1)
    os.replace(tmp, marker)
