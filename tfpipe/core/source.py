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
from typing import Any, Optional, Protocol, Sequence, Union

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


def find(data: Any, class_names: Optional[Sequence[str]] = None) -> Any:
    """Returns the Source for what the user passed.

    Args:
      data: a Source; a folder with one subfolder per class; a CSV manifest (path,label);
        a glob pattern (classes from each file's parent folder); `(paths, labels)`; a list
        of paths (predict: labels are 0); or a folder or glob another plug-in reads (a shard
        folder with tfpipe.json, TFRecord files).
      class_names: number the classes by these names (Keras' `class_names`), e.g. the
        training source's `class_names` for the eval data: a class the data lacks keeps its
        id free, a class the data has that the list lacks is refused, naming it.

    Raises:
      ValueError / DataError: the path is missing, empty or not one of these layouts; a class
        not in `class_names`.
    """
    source = _find(data)
    if class_names is None:
        return source
    if not hasattr(source, "with_class_names"):
        raise ValueError(f"{getattr(source, 'root', '') or type(source).__name__}: a {source.kind} source cannot "
                         f"renumber its classes (it has no with_class_names); leave class_names unset")
    return source.with_class_names(class_names)


def split(data: Any, eval_fraction: float = 0.2, *, seed: Optional[int] = None,
          class_names: Optional[Sequence[str]] = None) -> tuple[Any, Any]:
    """`(train_source, eval_source)`: a stable share of the files held out, for make_input_fn or build_dataset.

    A file goes to eval when a hash of its path (relative to the data's folder) falls below
    `eval_fraction`, so it stays on the same side on every run and machine, and adding files
    never moves the others. Both sources keep every class name, so their label ids agree.

    Args:
      data: files of one example each: a class folder, a CSV manifest, a glob, `(paths,
        labels)` or a FileSource (a shard folder or TFRecords are split when written).
      eval_fraction: the share of files held out, between 0 and 1.
      seed: None: the split the demo and tfpipe.keras.split_datasets make; another value draws
        another split, the same for the same seed.
      class_names: as for find().

    Raises:
      ValueError: a source that cannot be split by file, too few files, a fraction outside (0, 1).
    """
    if not isinstance(eval_fraction, (int, float)) or not 0.0 < eval_fraction < 1.0:
        raise ValueError(f"eval_fraction={eval_fraction!r}: must be between 0 and 1, the share of files held "
                         f"out for eval (e.g. 0.2)")
    source = find(data, class_names)
    if not hasattr(source, "split"):
        raise ValueError(f"{getattr(source, 'root', '') or data!r}: a {source.kind} source cannot be split by file; "
                         f"write separate train and eval data (e.g. tfpipe prepare on each half) and pass each")
    return source.split(eval_fraction, seed=seed)


def _find(data: Any) -> Any:
    if hasattr(data, "chain_input"):
        return data
    if isinstance(data, tuple) and len(data) == 2 and not isinstance(data[0], (str, os.PathLike)):
        return files.from_lists(*data)
    if isinstance(data, (list, tuple)):
        return files.from_lists(list(data), [0] * len(data))
    path = os.fspath(data)
    if any(c in path for c in "*?[") and not fs.exists(path):
        found = files.glob_files(path)
        return found if found.domain else _read_files(path, found.paths) or found
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
    found = _read_files(path, (path,)) if fs.isfile(path) and not registry.domain_of(path) else None
    if found is not None:
        return found
    raise ValueError(f"{path}: expected a folder with one subfolder per class ({registry.known_extensions()} "
                     f"files), a CSV manifest (path,label), a glob pattern, or a shard folder with {INDEX_NAME}")


def _read_files(what: str, paths: Sequence[str]) -> Any:
    """The Source a files reader makes of files no domain reads (e.g. TFRecords), or None."""
    for reader in registry.files_readers():
        found = reader(what, paths)
        if found is not None:
            return found
    return None


Data = Union[str, os.PathLike, Any]
