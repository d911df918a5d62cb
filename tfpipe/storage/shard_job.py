"""One shard, written atomically: the per-shard function the local writer and the Beam writer share.

A job names the examples of one shard (domain files to load and featurize, or the user's
own examples). The shard goes to a temp name in the work subfolder, is fsynced and renamed
into the folder when whole (on an object store: uploaded under its final name, see write_shard); then its manifest (size, sha256, counts, rejected inputs, and a
key of its inputs and settings) is written next to the temp files, so a rerun of the same
command keeps shards that are complete.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import os
from typing import Any, Callable, Optional

import numpy as np

from tfpipe.core import filesystem as fs
from tfpipe.errors import DataError
from tfpipe.storage import index as index_lib
from tfpipe.storage.codec import RecordCodec
from tfpipe.storage.formats import get_format
from tfpipe.storage.plan import ShardSpec
from tfpipe.storage.tfrecord import RecordWriter

_CHUNK_EXAMPLES = 16  # domain inputs featurized per call: amortizes TF dispatch; the STFT's ~3 MB stays in cache
PATH_KEY = "path"  # domain shards: the input's path relative to the input folder (verify: each input once)


@dataclasses.dataclass(frozen=True)
class DomainInputs:
    """How a worker makes examples from files: the domain's offline featurizer (picklable)."""

    domain: str
    config: Any
    store: str
    on_error: str

    def offline(self):
        return _offline(self)


@dataclasses.dataclass(frozen=True)
class ShardJob:
    """Everything one worker needs to write one shard (picklable).

    Attributes:
      spec: the plan's shard.
      out_dir: the shard folder; work_dir: its work subfolder (temp files, manifests).
      format: record format name; block_size: examples per record (0: sized by the first chunk of
        examples, where their values vary in length).
      schema: the stored record schema (RecordCodec.to_json()); label_key: the label's key.
      class_names: label id -> name (stored with each record).
      key: identifies inputs and settings; a manifest with another key is not this shard's.
      paths, names, labels: domain inputs (absolute path, relative name, label id) in record order.
      inputs: the domain featurizer, or None when `examples` holds the user's own examples.
      examples: user examples in record order (in-process writers only).
    """

    spec: ShardSpec
    out_dir: str
    work_dir: str
    format: str
    block_size: int
    schema: dict
    label_key: Optional[str]
    class_names: tuple[str, ...]
    key: str
    paths: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    labels: tuple[int, ...] = ()
    inputs: Optional[DomainInputs] = None
    examples: tuple = ()

    @property
    def num_inputs(self) -> int:
        return len(self.spec.examples)


def input_key(settings: Any, *parts: Any) -> str:
    """sha256 of the JSON of what made a shard (or a whole folder)."""
    return hashlib.sha256(json.dumps([settings, *parts], sort_keys=True, default=str).encode()).hexdigest()


def file_identity(path: str) -> tuple[int, int]:
    """(size, mtime_ns) of an input; an edited input changes one of them. (-1, -1) if unreadable."""
    try:
        st = fs.stat(path)
        return st.size, st.mtime_ns
    except OSError:
        return -1, -1


def write_shard(job: ShardJob, report: Callable[[int], None] = lambda n: None) -> dict:
    """Writes one shard atomically (or finds it complete); returns its manifest.

    Locally (and where rename is atomic) the shard goes to a temp name in the work subfolder and
    is renamed into place when whole; on an object store it is uploaded under its final name (an
    object appears whole when its upload completes, and rename there is copy + delete).

    Raises:
      DataError: an unreadable input with on_error="fail" (naming the file and the shard),
        or a full disk (the temp file is removed).
    """
    final = fs.join(job.out_dir, job.spec.file)
    manifest_path = fs.join(job.work_dir, job.spec.file + ".json")
    manifest = complete_manifest(final, manifest_path, job.key)
    if manifest:
        report(job.num_inputs)
        return {**manifest, "resumed": True}
    in_place = fs.writes_in_place(final)
    tmp = final if in_place else fs.join(job.work_dir, f"{job.spec.file}.tmp-{os.getpid()}")
    try:
        manifest = _write(job, tmp, report)
        if not in_place:
            fs.rename(tmp, final)
            index_lib.fsync_dir(job.out_dir)
        index_lib.write_json_atomic(manifest_path, manifest)  # after the shard: a manifest means it is whole
    except OSError as e:
        raise index_lib.disk_error(e, final) from e
    finally:
        if not in_place and fs.exists(tmp):
            fs.remove(tmp)
    return {**manifest, "resumed": False}


def _write(job: ShardJob, tmp: str, report: Callable[[int], None]) -> dict:
    codec = RecordCodec.from_json(job.schema, job.label_key)
    fmt = get_format(job.format)
    counts = np.zeros(len(job.class_names), np.int64)
    rejected: list[dict] = []
    pending: list[tuple[dict, int]] = []
    num_records = num_examples = 0
    block_size = job.block_size
    offline = job.inputs.offline() if job.inputs else None
    notes_before = collections.Counter(offline.notes()) if offline else collections.Counter()
    with fs.open(tmp, "wb") as f:
        writer = RecordWriter(f)

        def flush(full_only: bool) -> None:
            nonlocal num_records, num_examples, block_size
            if not block_size and pending:  # values of varying length: blocks sized by the first examples
                mean = int(np.mean([codec.bytes_of(e) for e, _ in pending]))
                block_size = fmt.block_size(codec, job.num_inputs, mean)
            while pending and (len(pending) >= block_size or not full_only):
                block, pending[:] = pending[:block_size], pending[block_size:]
                examples = [e for e, _ in block]
                labels = [label for _, label in block]
                names = [job.class_names[label] for label in labels]
                for record in fmt.records(codec, examples, labels, names, block_size):
                    writer.write(record)
                    num_records += 1
                num_examples += len(block)
                np.add.at(counts, labels, 1)

        for start in range(0, job.num_inputs, _CHUNK_EXAMPLES):
            chunk = range(start, min(start + _CHUNK_EXAMPLES, job.num_inputs))
            pending.extend(_chunk_examples(job, chunk, offline, rejected))
            flush(full_only=True)
            report(len(chunk))
        flush(full_only=False)
        if not fs.is_remote(tmp):
            f.flush()
            os.fsync(f.fileno())
    notes = collections.Counter(offline.notes()) - notes_before if offline else {}
    return {"file": job.spec.file, "num_examples": num_examples, "num_records": num_records,
            "block_size": block_size or 1, "bytes": writer.bytes, "sha256": writer.sha256,
            "class_counts": counts.tolist(), "rejected": rejected, "notes": dict(sorted(notes.items())),
            "key": job.key}


def _chunk_examples(job: ShardJob, chunk: range, offline, rejected: list) -> list[tuple[dict, int]]:
    """(example dict, label) for the inputs at `chunk` (record order); unreadable ones join `rejected`."""
    if job.inputs is None:
        label_key = job.label_key
        return [({k: v for k, v in job.examples[i].items() if k != label_key}, job.labels[i]) for i in chunk]
    kept, loaded = [], []
    for i in chunk:
        try:
            loaded.append(offline.load(job.paths[i]))
            kept.append(i)
        except DataError as e:
            if job.inputs.on_error == "fail":
                raise DataError(f"{e} (writing {job.spec.file}; rerun with --on_error=skip "
                                f"to list such files as rejected instead)") from None
            rejected.append({"path": display(job.names[i]), "reason": reject_reason(e, job.paths[i])})
    if not kept:
        return []
    values = offline.featurize(loaded)
    # The name's bytes as the OS has them: a file name that is not UTF-8 is stored exactly.
    return [({**{k: v[row] for k, v in values.items()}, PATH_KEY: os.fsencode(job.names[i])}, job.labels[i])
            for row, i in enumerate(kept)]


def complete_manifest(final: str, manifest_path: str, key: str) -> Optional[dict]:
    """The manifest of a complete shard made from the same inputs and settings, re-hashed; else None."""
    try:
        with fs.open(manifest_path, "rb") as f:
            manifest = json.loads(f.read())
        if (manifest.get("key") == key and fs.getsize(final) == manifest["bytes"]
                and index_lib.sha256_file(final) == manifest["sha256"]):
            return manifest
    except (OSError, ValueError, KeyError):
        pass  # missing or partial: the shard is written again
    return None


_OFFLINE: dict = {}  # one featurizer per worker process and settings


def _offline(inputs: DomainInputs):
    key = (inputs.domain, inputs.config, inputs.store)
    if key not in _OFFLINE:
        from tfpipe.core.registry import get_domain

        _OFFLINE[key] = get_domain(inputs.domain).offline(inputs.config, inputs.store)
    return _OFFLINE[key]


def reject_reason(error: Any, path: str) -> str:
    """An input's problem without its path (the index lists the path beside it)."""
    return display(str(error).removeprefix(f"{path}: "))


def display(text: str) -> str:
    """Text that can always be written (a file name that is not UTF-8 shows its odd bytes as escapes)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
