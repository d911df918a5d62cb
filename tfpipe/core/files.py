"""FileSource: one example per file, and its listings (class folder, CSV manifest, glob, lists).

A class folder, a CSV manifest (path,label), a glob pattern or the user's own `(paths,
labels)` becomes a FileSource: the files in label order, their label ids, the class names,
and the registered domain the files belong to (found from their extensions). `label_ids`
makes ids of labels given as ints or names; `FileSource.split` holds out a stable share.
"""

from __future__ import annotations

import csv
import dataclasses
import glob as glob_lib
import hashlib
import os
import stat
from typing import Any, Optional, Sequence

import tensorflow as tf

from tfpipe.core import filesystem as fs
from tfpipe.core import registry, remote_listing
from tfpipe.core.chain_input import ChainInput
from tfpipe.core.labels import check_class_names, label_ids, pinned_ids  # noqa: F401 (label_ids: public here)
from tfpipe.core.stage import user_stages
from tfpipe.errors import DataError, listed

MAX_LISTED = 5  # bad files named in one error message


@dataclasses.dataclass(frozen=True)
class FileSource:
    """One example per file: a class folder, a CSV manifest, a glob, or the user's own list.

    Attributes:
      root: the folder, CSV or pattern the user named ("" for a plain list).
      paths: the files, absolute, in listing order (label order, unless class_names pinned another).
      labels: label id per file.
      class_names: label id -> class name.
      domain: the registered domain the files belong to ("" when none matched).
    """

    root: str
    paths: tuple[str, ...]
    labels: tuple[int, ...]
    class_names: tuple[str, ...]
    domain: str = ""

    @property
    def kind(self) -> str:
        """The domain's source kind ("wav", "image") or "files"."""
        return registry.get_domain(self.domain).kind if self.domain else "files"

    @property
    def num_examples(self) -> int:
        return len(self.paths)

    def examples_per_file(self) -> tuple[int, ...]:
        """One example per file."""
        return (1,) * len(self.paths)

    def subset(self, keep: Sequence[int]) -> "FileSource":
        """The same source with only the files at positions `keep` (class names kept)."""
        return dataclasses.replace(self, paths=tuple(self.paths[i] for i in keep),
                                   labels=tuple(self.labels[i] for i in keep))

    def with_class_names(self, class_names: Sequence[str]) -> "FileSource":
        """The same files, numbered by `class_names` (a class it lacks is fine; one it does not list is refused).

        Raises:
          ValueError: a class of these files that `class_names` does not list, naming it.
        """
        class_names = check_class_names(class_names)
        ids = pinned_ids(self.class_names, class_names, self.root or "the files", self.labels)
        labels = self.labels if ids is None else tuple(ids[i] for i in self.labels)
        return dataclasses.replace(self, labels=labels, class_names=class_names)

    def split(self, eval_fraction: float, seed: Optional[int] = None) -> tuple["FileSource", "FileSource"]:
        """(train, eval) by a hash of each file's path, so a file never changes side between runs.

        `seed` draws another such split (None: the one the demo and split_datasets use).
        """
        if not 0.0 < eval_fraction < 1.0:
            raise ValueError(f"eval_fraction={eval_fraction!r}: must be between 0 and 1")
        base = folder(self.root)
        salt = "" if seed is None else f"{seed}:"
        is_eval = [_stable_fraction(salt + fs.relpath(p, base)) < eval_fraction for p in self.paths]
        train = [i for i, e in enumerate(is_eval) if not e]
        held = [i for i, e in enumerate(is_eval) if e]
        if not train or not held:
            raise ValueError(f"{self.root}: {len(self.paths)} files are too few to hold out "
                             f"{eval_fraction:.0%} for eval; pass --eval_data or add files")
        return self.subset(train), self.subset(held)

    def chain_input(self, mode: str, features: Any = None, *, read: Any = None, process: Any = None,
                    batch_process: Any = None) -> ChainInput:
        """The user's functions over (path, label), or the domain's stages over its checked file table."""
        labels = tf.constant(self.labels, tf.int64)
        if read is None and process is None and batch_process is None:
            if not self.domain:
                raise ValueError(f"{self.root or 'the files'}: no built-in domain reads these files "
                                 f"(known: {registry.known_extensions()}); pass read= and process= functions")
            domain = registry.get_domain(self.domain)
            config = domain.config(features)
            table, stages = domain.reading(self.paths, config, mode)  # every unusable file is named here
            stages = tuple(stages)
        else:
            table = tf_paths(self.paths)
            stages = tuple(user_stages(read, process, batch_process))
        files = tf.data.Dataset.from_tensor_slices((table, labels))
        return ChainInput(files, len(self.paths), len(self.paths), stages, paths=self.paths)



def tf_paths(paths: Sequence[str]) -> list[bytes]:
    """Paths as the bytes the OS uses, so a file name that is not UTF-8 still reaches tf.io.read_file."""
    return [os.fsencode(p) for p in paths]


def folder(root: str) -> str:
    """The folder a Source's relative names start from: the root folder, or a CSV's folder."""
    return root if fs.isdir(root) else fs.dirname(root)


def from_lists(paths: Sequence[Any], labels: Sequence[Any], root: str = "") -> FileSource:
    """A FileSource over the user's own paths and labels (int ids, or names made into ids by label_ids)."""
    paths = [os.fspath(p.decode() if isinstance(p, bytes) else p) for p in paths]
    labels = list(labels.tolist() if hasattr(labels, "tolist") else labels)
    if len(paths) != len(labels):
        raise ValueError(f"{len(paths)} paths but {len(labels)} labels: pass one label per path")
    if not paths:
        raise ValueError("no paths given")
    ids, names = label_ids(labels)
    return FileSource(root, tuple(paths), tuple(ids), names, common_domain(paths))


def common_domain(paths: Sequence[str]) -> str:
    """The domain every path belongs to, or "" (none, or several)."""
    kinds = {d.name if d else "" for d in map(registry.domain_of, paths)}
    return kinds.pop() if len(kinds) == 1 else ""


def _stable_fraction(key: str) -> float:
    """A number in [0, 1) fixed by `key` across runs and machines."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2.0 ** 64


def class_folder(root: str) -> FileSource:
    """One subfolder per class; the domain is the one whose files the folder holds.

    Every visible subfolder is a class, an empty one too: dropping it would shift the label
    ids of the classes after it, so a train and an eval folder would disagree.
    """
    if fs.is_remote(root):
        classes, by_domain, stray = remote_listing.class_files(root, registry.domain_of)
        return _class_folder_of(root, classes, by_domain, stray)
    by_domain: dict[str, dict[str, list[str]]] = {}
    classes, stray, unreadable = [], [], []
    for name in sorted(_listdir(root)):
        class_dir = os.path.join(root, name)
        try:
            is_dir = stat.S_ISDIR(os.stat(class_dir).st_mode)
        except OSError as e:  # a name too long, a link to nowhere: said, not skipped
            unreadable.append(e)
            continue
        if not is_dir:
            if registry.domain_of(name):
                stray.append(class_dir)
            continue
        if name.startswith("."):  # .ipynb_checkpoints, .git, tfpipe's own work folders
            continue
        classes.append(name)
        for d, subdirs, names in sorted(os.walk(class_dir, onerror=unreadable.append)):
            subdirs[:] = sorted(s for s in subdirs if not s.startswith("."))
            for f in sorted(names):
                domain = registry.domain_of(f)
                if domain:
                    by_domain.setdefault(domain.name, {}).setdefault(name, []).append(os.path.join(d, f))
    if unreadable:  # os.walk would skip them: their files would be missing without a word
        raise DataError(f"{root}: {len(unreadable)} folders cannot be listed, so their files would be left out:"
                        + listed(f"{e.filename}: {e.strerror}" for e in unreadable)
                        + "\nfix their permissions (chmod +rx) or move them out of the data folder")
    return _class_folder_of(root, classes, by_domain, stray)


def _class_folder_of(root: str, classes: list[str], by_domain: dict, stray: list[str]) -> FileSource:
    """The FileSource of a listed class folder, or the error its layout deserves."""
    if stray:
        raise ValueError(f"{root}: {stray[0]} is not inside a class folder; put each file under {root}/<class_name>/")
    if len(by_domain) > 1:
        counts = ", ".join(f"{sum(map(len, c.values()))} {n}" for n, c in sorted(by_domain.items()))
        raise ValueError(f"{root}: files of several domains ({counts}); keep one kind of file per folder")
    if not by_domain:
        raise ValueError(f"{root}: no {registry.known_extensions()} files found; expected one subfolder per class")
    domain, files_by_class = next(iter(by_domain.items()))
    return _labelled(root, {c: sorted(files_by_class.get(c, [])) for c in classes}, domain)


def _listdir(folder: str) -> list[str]:
    """os.listdir, or a DataError naming the folder and why it cannot be listed."""
    try:
        return os.listdir(folder)
    except OSError as e:
        raise DataError(f"{folder}: cannot list the folder ({e.strerror}); fix its permissions or the path") from None


def glob_files(pattern: str) -> FileSource:
    """Files matching a pattern; each one's class is its parent folder's name."""
    if fs.is_remote(pattern):
        matched = fs.glob(pattern)
        # A match named like a domain's file is taken as a file (as remote_listing does); the rest are asked.
        unknown = [p for p in matched if registry.domain_of(p) is None]
        paths = sorted({p for p in matched if registry.domain_of(p)}
                       | {p for p, ok in zip(unknown, fs.parallel(fs.isfile, unknown)) if ok})
    else:
        paths = sorted(os.path.abspath(p) for p in glob_lib.glob(pattern, recursive=True) if os.path.isfile(p))
    if not paths:
        fs.check_bucket(pattern)
        raise ValueError(f"{pattern}: the pattern matches no files")
    files_by_class: dict[str, list[str]] = {}
    for p in paths:
        files_by_class.setdefault(os.path.basename(fs.dirname(p)), []).append(p)
    return _labelled(pattern, dict(sorted(files_by_class.items())), common_domain(paths),
                     min_classes=1)


def csv_manifest(csv_path: str) -> FileSource:
    base = fs.dirname(csv_path)
    try:
        with fs.open(csv_path, newline="", encoding="utf-8-sig") as f:  # -sig: a BOM is not part of 'path'
            reader = csv.DictReader(f)
            columns = reader.fieldnames or []
            if sorted(columns) != ["label", "path"]:
                unknown = sorted(set(columns) - {"path", "label"})
                raise ValueError(f"{csv_path}: columns {columns} but a manifest has exactly 'path,label'"
                                 + (f"; unknown columns {unknown}" if unknown else ""))
            rows, lines, incomplete = [], [], []
            for line, r in enumerate(reader, start=2):
                if not r["path"] or r["label"] in (None, ""):
                    incomplete.append(line)
                else:
                    rows.append((fs.normjoin(base, r["path"]), r["label"]))
                    lines.append(f"line {line}")
    except UnicodeDecodeError as e:
        raise DataError(f"{csv_path}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start}); "
                        f"save the manifest as UTF-8") from None
    if incomplete:
        raise DataError(f"{csv_path}: {len(incomplete)} rows lack a path or a label (lines "
                        f"{', '.join(map(str, incomplete[:MAX_LISTED]))}); every row needs both")
    missing = fs.first_missing(p for p, _ in rows)
    if missing:
        raise DataError(f"{csv_path}: {len(missing)} listed files do not exist, e.g. "
                        f"{', '.join(missing[:MAX_LISTED])}; relative paths resolve against the CSV's folder")
    labels_of: dict[str, set] = {}
    for path, label in rows:
        labels_of.setdefault(path, set()).add(label)
    conflicting = sorted(p for p, ls in labels_of.items() if len(ls) > 1)
    if conflicting:
        raise DataError(f"{csv_path}: {len(conflicting)} files are listed with different labels:"
                        + listed(f"{p}: {', '.join(sorted(labels_of[p]))}" for p in conflicting)
                        + "\ngive each file one label")
    try:
        ids, names = label_ids([label for _, label in rows], lines)
    except ValueError as e:
        raise DataError(f"{csv_path}: {e}") from None
    files_by_class: dict[str, list[str]] = {name: [] for name in names}
    for (path, _), i in zip(rows, ids):
        files_by_class[names[i]].append(path)
    return _labelled(csv_path, files_by_class, common_domain([p for p, _ in rows]))


def _labelled(root: str, files_by_class: dict, domain: str, min_classes: int = 2) -> FileSource:
    filled = [c for c, files in files_by_class.items() if files]
    if not filled:
        raise ValueError(f"{root}: no files found; expected one subfolder (or CSV label) per class")
    if len(filled) < min_classes:
        only = filled[0]
        raise ValueError(f"{root}: only one class ({only!r}); a classifier needs at least two")
    names = tuple(files_by_class)
    paths = tuple(p for c in names for p in files_by_class[c])
    labels = tuple(i for i, c in enumerate(names) for _ in files_by_class[c])
    return FileSource(root, paths, labels, names, domain)

