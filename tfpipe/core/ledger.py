"""Where a resumable train stream stood at each checkpoint step, kept beside the checkpoints.

A checkpoint holds the global step, not the input position. Resuming at step S as S x
batch size is right only while the files and the batch size stay as they were; the ledger
records, at every input_fn call, the step, the stream position (in examples), the batch
size, the seed and a fingerprint of the files, so a later call can
  * continue exactly where the stream stood, also after the batch size changed, and
  * when the files (added, removed, reordered) or the seed changed, start the next epoch in the new order
    instead of mapping old positions onto a new order (which repeats some examples and skips
    others), and say so.
One JSON file per model_dir and input pipeline, replaced atomically; tf.io.gfile, so a model_dir
on GCS or HDFS works as it does for the checkpoints.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Optional, Sequence

import tensorflow as tf

FILE_NAME = "tfpipe-input-{pipeline}.json"


@dataclasses.dataclass(frozen=True)
class Entry:
    """The stream at one step: position (examples consumed), batch size, examples per step, the files."""

    step: int
    position: int
    batch_size: int
    per_step: int
    files: str
    epoch_size: int
    seed: int = 0  # the order's seed (ledgers written before it was recorded read as 0, the default then)


@dataclasses.dataclass(frozen=True)
class Resumed:
    """Where to start, and what a person should be told about it ("" when nothing changed)."""

    position: int
    note: str = ""


def fingerprint(names: Sequence[str], counts: Sequence[int] = ()) -> str:
    """A key of the file list in stream order (with examples per file, where files hold several)."""
    digest = hashlib.sha256()
    for name, count in zip(names, list(counts) or [1] * len(names)):
        digest.update(f"{name}\0{count}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:16]


def resume_position(model_dir: Optional[str], pipeline: int, step: int, now: Entry) -> Resumed:
    """The stream position for checkpoint `step`, given what this call's stream looks like (`now`).

    Without a ledger (a model_dir of an older tfpipe), position = step x batch size x replicas.
    """
    entries = _read(model_dir, pipeline)
    before = [e for e in entries if e.step <= step]
    if not before:
        return Resumed(step * now.batch_size * now.per_step)
    last = before[-1]
    position = last.position + (step - last.step) * last.batch_size * last.per_step
    if last.files == now.files and last.seed == now.seed:
        note = ""
        if last.batch_size != now.batch_size or last.per_step != now.per_step:
            note = (f"tfpipe: batch size {last.batch_size} x {last.per_step} -> {now.batch_size} x {now.per_step} "
                    f"since step {last.step}: continuing at example {position} of the stream")
        return Resumed(position, note)
    # Old positions mean nothing in a new order: start the next epoch of the new files (or seed).
    epoch = -(-position // max(1, last.epoch_size))  # the next epoch boundary of the old order
    change = (f"the input files changed since step {last.step} ({last.epoch_size} -> {now.epoch_size} examples)"
              if last.files != now.files else f"the seed changed since step {last.step} ({last.seed} -> {now.seed})")
    rest = ("the rest of epoch {} is not read".format(epoch - 1) if position % max(1, last.epoch_size)
            else "the last epoch had ended")
    return Resumed(epoch * now.epoch_size,
                   f"tfpipe: {change}: resuming at the start of epoch {epoch} in the new order; {rest} "
                   f"(mapping old positions onto the new order would repeat some examples and skip others)")


def record(model_dir: Optional[str], pipeline: int, entry: Entry) -> None:
    """Adds `entry` (dropping entries at or after its step: a restart from an older checkpoint)."""
    if not model_dir:
        return
    entries = [e for e in _read(model_dir, pipeline) if e.step < entry.step] + [entry]
    path = os.path.join(model_dir, FILE_NAME.format(pipeline=pipeline))
    tf.io.gfile.makedirs(model_dir)
    tmp = f"{path}.tmp-{os.getpid()}"
    with tf.io.gfile.GFile(tmp, "w") as f:
        f.write(json.dumps([dataclasses.asdict(e) for e in entries[-1000:]]))
    tf.io.gfile.rename(tmp, path, overwrite=True)


def _read(model_dir: Optional[str], pipeline: int) -> list[Entry]:
    if not model_dir:
        return []
    path = os.path.join(model_dir, FILE_NAME.format(pipeline=pipeline))
    try:
        with tf.io.gfile.GFile(path) as f:
            return sorted((Entry(**e) for e in json.loads(f.read())), key=lambda e: e.step)
    except (tf.errors.NotFoundError, OSError, ValueError, TypeError):
        return []  # no ledger (or an unreadable one): positions from the step alone
