"""What a shard writer writes: your examples or a domain's files, prepared as one typed `Prepared`.

Preparing finds the schema (inferred from the first example, given, or declared by the
domain), the labels and class names, and what identifies the inputs for a rerun; a domain's
files are then checked once, up front (header check or a trial decode), so every bad input
is named before anything is written.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from tfpipe.core import filesystem as fs
from tfpipe.errors import DataError, listed
from tfpipe.storage.codec import RecordCodec, check_all
from tfpipe.storage.schema import Field
from tfpipe.storage.shard_job import PATH_KEY, DomainInputs, display, file_identity, input_key, reject_reason


@dataclasses.dataclass(frozen=True)
class Files:
    """A domain's input files.

    Attributes:
      source: the Source that found them (paths, labels).
      names: each path relative to the input folder (the records store its bytes, the index its text).
      offline: the domain's offline loader/featurizer (here: for the up-front check).
      inputs: how a worker process makes the same featurizer (picklable).
      good: positions (in source.paths) of the inputs that passed the up-front check.
      bad: (position, why) of those that did not.
    """

    source: Any
    names: tuple[str, ...]
    offline: Any
    inputs: DomainInputs
    good: tuple[int, ...] = ()
    bad: tuple[tuple[int, str], ...] = ()

    def checked(self) -> "Files":
        """These files with `good` and `bad` filled in: every input checked once (see check_inputs)."""
        good, bad = check_inputs(self.source.paths, self.names, self.offline)
        return dataclasses.replace(self, good=good, bad=bad)


@dataclasses.dataclass(frozen=True)
class Prepared:
    """Everything planning and the shard jobs need to know about the examples to write.

    Attributes:
      codec: the stored record schema.
      class_names: label id -> name.
      labels: the label id of each example to write (a domain's: checked inputs only).
      identity: what a rerun compares to recognize the same inputs (names, sizes, mtimes; or
        your examples' encoded bytes).
      domain: the index's domain entry; None for your own examples.
      examples: your examples (in memory), None for a domain's files.
      files: a domain's files, None for your own examples.
      input: the folder or CSV the files were found in ("" for your examples or a list of files).
    """

    codec: RecordCodec
    class_names: tuple[str, ...]
    labels: tuple[int, ...]
    identity: Any
    domain: Optional[dict] = None
    examples: Optional[tuple] = None
    files: Optional[Files] = None
    input: str = ""

    @property
    def rejected(self) -> list[dict]:
        """The inputs found unusable up front, as the index lists them."""
        if self.files is None:
            return []
        paths, names = self.files.source.paths, self.files.names
        return [{"path": display(names[i]), "reason": reject_reason(why, paths[i])} for i, why in self.files.bad]

    @property
    def found(self) -> int:
        """Inputs found: written + rejected up front."""
        return len(self.labels) + len(self.files.bad if self.files else ())

    def checked(self) -> "Prepared":
        """Domain files checked up front (labels then count the usable ones); your examples as they are."""
        if self.files is None:
            return self
        files = self.files.checked()
        return dataclasses.replace(self, files=files, labels=tuple(files.source.labels[i] for i in files.good))

    def fail_on_rejected(self, on_error: str) -> None:
        """on_error='fail': DataError listing every bad input with its reason, before anything is written."""
        bad = self.files.bad if self.files else ()
        if bad and on_error == "fail":
            raise DataError(f"{len(bad)} of {self.found} input files cannot be used; nothing was written:"
                            f"{listed(display(why) for _, why in bad)}\nFix or remove them, or rerun with "
                            f"--on_error=skip (on_error='skip') to write the others and list these in tfpipe.json's "
                            f"rejected")


# --- your examples ---------------------------------------------------------------------------------

def user_examples(data: Any) -> Optional[list]:
    """The examples as a list when `data` is an iterable of dicts; None for a domain's files."""
    if isinstance(data, (str, bytes, os.PathLike)) or hasattr(data, "chain_input"):
        return None
    if isinstance(data, tuple) and len(data) == 2 and not isinstance(data[0], Mapping):
        return None  # (paths, labels)
    items = data if isinstance(data, list) else list(data)
    if items and isinstance(items[0], Mapping):
        return items
    if not items:
        raise ValueError("write_shards got no examples (an empty iterable)")
    return None if isinstance(items[0], (str, os.PathLike)) else items


def prepare_examples(examples: list, label_key: Optional[str], schema: Optional[Mapping[str, Any]],
                     dtype: Optional[str]) -> Prepared:
    """Your examples: schema inferred (or given) and checked on every example; labels and class names."""
    if schema is not None:
        fields = {k: (v if isinstance(v, Field) else _field(k, v)) for k, v in schema.items()}
        codec = RecordCodec(fields, label_key)
    else:
        codec = RecordCodec.infer(examples, label_key)
    check_all(codec, examples)
    raw = [e[label_key] for e in examples] if label_key else [0] * len(examples)
    ids, names = _label_ids(raw)
    stored = codec.with_storage_dtype(dtype)
    identity = input_key(None, [stored.encode([e], [i], [names[i]]).hex() for e, i in zip(examples, ids)])
    return Prepared(stored, names, tuple(ids), identity, examples=tuple(examples))


def _label_ids(raw: Sequence[Any]) -> tuple[list[int], tuple[str, ...]]:
    """Label ids and class names: whole numbers are their own ids, other labels sorted by name."""
    if all(isinstance(v, int) or (hasattr(v, "dtype") and getattr(v, "dtype").kind in "iu") for v in raw):
        ids = [int(v) for v in raw]
        if min(ids) < 0:
            raise DataError(f"example {ids.index(min(ids))}: label {min(ids)}: label ids must be >= 0")
        return ids, tuple(str(i) for i in range(max(ids) + 1))
    text = [v.decode() if isinstance(v, bytes) else str(v) for v in raw]
    names = tuple(sorted(set(text)))
    return [names.index(t) for t in text], names


def _field(key: str, value: Any) -> Field:
    try:
        dtype, shape = value
        return Field(np.dtype(dtype).name if dtype not in ("bytes", "str") else dtype,
                     tuple(None if d is None else int(d) for d in shape))
    except (TypeError, ValueError) as e:
        raise ValueError(f"schema[{key!r}]={value!r}: expected (dtype, shape), e.g. ('float32', (64,)), or "
                         f"(None, 64) for a varying first dimension ({e})") from None


# --- a domain's files --------------------------------------------------------------------------------

def prepare_files(data: Any, out_dir: str, features: Any, store: Optional[str], on_error: str,
                  dtype: str) -> Prepared:
    """A domain's files: found, the domain's schema, identity for resume (checked later: Prepared.checked)."""
    from tfpipe.core.files import FileSource, folder
    from tfpipe.core.registry import get_domain
    from tfpipe.core.source import find
    from tfpipe.storage.source import ShardSource

    source = find(data)
    if not isinstance(source, FileSource) or not source.domain:
        what = ("already a shard folder" if isinstance(source, ShardSource) else
                "no built-in domain" if isinstance(source, FileSource) else f"a {source.kind} source")
        raise ValueError(f"{source.root}: {what}; write_shards needs a domain's files (a folder with one "
                         f"subfolder per class, or a CSV) or an iterable of example dicts")
    base = fs.abspath(folder(source.root)) if source.root else ""
    if base and out_dir == base:
        raise ValueError(f"{out_dir}: the output folder is the input folder; its tfpipe.json would turn the "
                         f"input folder into a shard folder. Pick another --output")
    domain = get_domain(source.domain)
    config = domain.config(features)
    store = store or domain.stores()[0]
    if store not in domain.stores():
        raise ValueError(f"store={store!r}: the {domain.name} domain stores {', '.join(map(repr, domain.stores()))}")
    offline = domain.offline(config, store)
    prefix = fs.join(base, "") if base else ""
    names = tuple(p[len(prefix):] if prefix and p.startswith(prefix) else p for p in source.paths)
    declared = {k: {"dtype": d, "shape": list(s)} for k, (d, s) in offline.schema.fields.items()}
    codec = RecordCodec.from_json({**declared, PATH_KEY: {"dtype": "bytes", "shape": []}}).with_storage_dtype(dtype)
    identity = [(name, label, *file_identity(p)) for name, label, p in zip(names, source.labels, source.paths)]
    files = Files(source, names, offline, DomainInputs(domain.name, config, store, on_error))
    return Prepared(codec, tuple(source.class_names), tuple(source.labels), identity,
                    domain={"name": domain.name, "store": store, "config": dataclasses.asdict(config),
                            "features": declared}, files=files, input=fs.abspath(source.root) if source.root else "")


def check_inputs(paths: Sequence[str], names: Sequence[str], offline) -> tuple[tuple[int, ...], tuple]:
    """Every input checked once, up front: header check (offline.check) or a trial load.

    Returns:
      Positions of the good inputs, and (position, why) of the bad ones (duplicates, broken or
      looping links, and whatever the domain's check refuses).
    """
    check = getattr(offline, "check", None) or offline.load

    def problem(path: str) -> str:
        """'' when the input is usable, else why not."""
        try:
            check(path)
            return ""
        except DataError as e:
            return str(e)
        except OSError as e:  # a broken or looping link, a file that vanished
            return f"{display(path)}: unreadable ({e.strerror or e})"

    seen: dict = {}
    first = []  # positions of the first listing of each file: the ones checked
    good, bad = [], []
    for i, path in enumerate(paths):
        real = fs.realpath(path)
        if real in seen:
            bad.append((i, f"{display(path)}: listed twice (also as {names[seen[real]]}); remove one of the entries"))
            continue
        seen[real] = i
        first.append(i)
    for i, why in zip(first, fs.parallel(lambda i: problem(paths[i]), first,
                                         remote=bool(paths) and fs.is_remote(paths[0]))):
        if why:
            bad.append((i, why))
        else:
            good.append(i)
    return tuple(sorted(good)), tuple(sorted(bad))
