"""Sources: where examples are, and what the chain starts from.

`find(data)` turns what a user passes (a folder, a CSV, a glob, `(paths, labels)`, a
list of paths, a shard folder) into a Source. A Source gives the chain a `ChainInput`
(tfpipe.core.chain_input): the cheap per-file table to repeat and shuffle, how to read a
file's records if it has many (shards), and the map stages. Files of a registered domain
are listed by `tfpipe.core.files`; other folders (shard folders) by the folder readers
registered in `tfpipe.core.registry`, so this module names none of them.
"""

from __future__ import annotations

import os
from typing import Any, Protocol, Union

from tfpipe.core import files, registry
from tfpipe.core import filesystem as fs
from tfpipe.core.chain_input import ChainInput

INDEX_NAME = "tfpipe.json"


class Source(Protocol):
    root: str
    paths: tuple[str, ...]
    class_names: tuple[str, ...]

    @property
    def kind(self) -> str: ...

    @property
    def num_examples(self) -> int: ...

    def examples_per_file(self) -> tuple[int, ...]:
        """Examples in each of `paths` (the resumable order's epoch is their sum)."""

    def chain_input(self, mode: str, features: Any = None, *, read: Any = None, process: Any = None,
                    batch_process: Any = None) -> ChainInput: ...


def find(data: Any) -> Any:
    """Returns the Source for what the user passed.

    Args:
      data: a Source; a folder with one subfolder per class; a CSV manifest (path,label);
        a glob pattern (classes from each file's parent folder); `(paths, labels)`; a list
        of paths (predict: labels are 0); or a folder another plug-in reads (a shard
        folder with tfpipe.json).

    Raises:
      ValueError / DataError: the path is missing, empty or not one of these layouts.
    """
    if hasattr(data, "chain_input"):
        return data
    if isinstance(data, tuple) and len(data) == 2 and not isinstance(data[0], (str, os.PathLike)):
        return files.from_lists(*data)
    if isinstance(data, (list, tuple)):
        return files.from_lists(list(data), [0] * len(data))
    path = os.fspath(data)
    if any(c in path for c in "*?[") and not fs.exists(path):
        return files.glob_files(path)
    path = fs.abspath(path)  # a gs://, s3://, ram:// path keeps its scheme (tfpipe.core.filesystem)
    if fs.isdir(path):
        for reader in registry.folder_readers():
            found = reader(path)
            if found is not None:
                return found
        return files.class_folder(path)
    if path.lower().endswith(".csv") and fs.isfile(path):
        return files.csv_manifest(path)
    if not fs.exists(path):
        fs.check_bucket(path)
        raise ValueError(f"{path}: no such file or folder")
    raise ValueError(f"{path}: expected a folder with one subfolder per class ({registry.known_extensions()} "
                     f"files), a CSV manifest (path,label), a glob pattern, or a shard folder with {INDEX_NAME}")


Data = Union[str, os.PathLike, Any]
