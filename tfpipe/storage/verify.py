"""verify: everything a shard index claims, checked against the records themselves.

Per shard: size and sha256; every record decoded with the index's schema (each value's byte
count must fit its dtype and shape, and each record's own schema string must equal the
index's, so a same-size dtype or shape edit is caught too); records, examples and block
sizes counted; labels inside class_names and each record's class name equal to
class_names[label] (a reordered list is caught); class counts; no input stored twice.
For the folder: total num_examples, shard names inside the folder, no stray shard files.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tfpipe.core import filesystem as fs
from tfpipe.storage import index as index_lib
from tfpipe.storage.codec import SCHEMA_KEY, RecordCodec, rows
from tfpipe.storage.formats import BLOCK
from tfpipe.storage.plan import SHARD_PATTERN
from tfpipe.storage.shard_job import PATH_KEY

_READ_BATCH = 256  # records decoded per call


@dataclasses.dataclass(frozen=True)
class ShardCheck:
    """What verification found in one shard.

    Attributes:
      file: shard file name.
      problem: "" when the shard is intact, else what is wrong.
      num_records: records read (up to the first damaged one).
      class_counts: examples per label id.
    """

    file: str
    problem: str
    num_records: int
    class_counts: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class FolderCheck:
    """Per-shard checks plus problems of the folder as a whole ('' when none)."""

    shards: list
    problems: list

    @property
    def ok(self) -> bool:
        return not self.problems and not any(c.problem for c in self.shards)


def verify_folder(shard_dir) -> FolderCheck:
    """Re-reads every shard and checks every claim of the index (see the module docstring).

    Args:
      shard_dir: a folder with tfpipe.json, or its ShardSource.

    Raises:
      DataError: the index itself is unreadable or incomplete (naming it).
    """
    from tfpipe.core.source import find

    source = find(shard_dir)
    index, root = source.index, source.root
    index_lib.check_readable(index, fs.join(root, index_lib.INDEX_NAME))
    codec = source.codec
    seen: set = set()
    checks = [_check_shard(fs.join(root, s["file"]), s, index, codec, seen) for s in index["shards"]]
    problems = []
    listed = sum(s["num_examples"] for s in index["shards"])
    if index["num_examples"] != listed:
        problems.append(f"num_examples is {index['num_examples']} but the shards list {listed}")
    files = {s["file"] for s in index["shards"]}
    strays = sorted(n for n in fs.listdir(root) if SHARD_PATTERN.match(n) and n not in files)
    if strays:
        problems.append(f"shard files not in {index_lib.INDEX_NAME}: {', '.join(strays[:5])}"
                        + (f" and {len(strays) - 5} more" if len(strays) > 5 else "")
                        + " (a plain glob would read them; remove them or rerun tfpipe prepare)")
    return FolderCheck(checks, problems)


def verify_shards(shard_dir) -> list[ShardCheck]:
    """verify_folder's per-shard checks (the v1 API)."""
    return verify_folder(shard_dir).shards


def _check_shard(path: str, shard: dict, index: dict, codec: RecordCodec, seen: set) -> ShardCheck:
    import tensorflow as tf

    names = list(index["class_names"])
    counts = np.zeros(max(len(names), 1), np.int64)
    problem = index_lib.size_problem(path, shard["bytes"])
    if not problem:
        try:
            if index_lib.sha256_file(path) != shard["sha256"]:
                problem = "sha256 differs from the index"
        except OSError as e:
            problem = f"cannot be read ({e.strerror})"
            return ShardCheck(shard["file"], problem, 0, tuple(int(c) for c in counts[:len(names)]))
    records = examples = 0
    block = index["format"] == BLOCK
    try:
        for labels, label_names, paths, schemas, sizes in _summaries(path, codec, block):
            records += len(sizes)
            examples += len(labels)
            problem = problem or _record_problem(codec, schemas, labels, label_names, names, index)
            if not problem and block:
                full = shard["block_size"]
                if (sizes[:-1] != full).any() or (sizes > full).any():
                    problem = f"blocks of {sorted(set(sizes.tolist()))} examples, index lists {full}"
            counts += np.bincount(np.clip(labels, 0, counts.size - 1), minlength=counts.size)[:counts.size]
            for p in paths:
                if not problem and p in seen:
                    problem = f"{p.decode(errors='replace')} is stored twice"
                seen.add(p)
    except tf.errors.OpError as e:  # a damaged record, a dtype/shape that does not fit, a file gone meanwhile
        last = e.message.strip().splitlines()[-1][:160] if e.message.strip() else type(e).__name__
        problem = problem or f"unreadable record after {records} ({last})"
    if not problem and records != shard["num_records"]:
        problem = f"{records} records, index lists {shard['num_records']}"
    if not problem and examples != shard["num_examples"]:
        problem = f"{examples} examples, index lists {shard['num_examples']}"
    listed = shard.get("class_counts")
    if not problem and listed is not None and list(listed) != counts[:len(names)].tolist():
        problem = f"examples per class {counts[:len(names)].tolist()}, index lists {list(listed)}"
    return ShardCheck(shard["file"], problem, records, tuple(int(c) for c in counts[:len(names)]))


def _record_problem(codec: RecordCodec, schemas, labels, label_names, names, index) -> str:
    """What is wrong with a batch of decoded records ('' when nothing)."""
    wrong = [s for s in set(schemas) if s and s.decode() != codec.signature]
    if wrong:
        return (f"records hold {wrong[0].decode()!r} but {index_lib.INDEX_NAME} says {codec.signature!r} "
                f"(features dtype/shape)")
    if labels.size and (labels.min() < 0 or labels.max() >= len(names)):
        return f"label {int(labels.max() if labels.max() >= len(names) else labels.min())} outside class_names " \
               f"(0..{len(names) - 1})"
    if codec.label_names and label_names is not None:
        for label, name in zip(labels, label_names):
            if name and name.decode() != names[label]:
                return (f"a record of label {label} is class {name.decode()!r} but class_names[{label}] is "
                        f"{names[label]!r} (class_names reordered or edited)")
    return ""


def _summaries(path: str, codec: RecordCodec, block: bool):
    """Yields (labels, label names, paths, schema strings, examples per record) per batch of records."""
    import tensorflow as tf

    keys = list(codec.fields)
    has_path = PATH_KEY in codec.fields

    def schema_of(records):
        spec = {SCHEMA_KEY: tf.io.FixedLenFeature([], tf.string, default_value="")}
        return tf.io.parse_example(records, spec)[SCHEMA_KEY]

    if block:
        def summarize(record):
            values, (labels, label_names) = codec.decode_block(record, keys, with_label_names=True)
            n = tf.shape(labels, out_type=tf.int64)[0] if codec.label_key else rows(next(iter(values.values())))
            for v in values.values():  # every key holds the same number of examples
                tf.debugging.assert_equal(rows(v), n, message="keys of one block differ in length")
            paths = values[PATH_KEY] if has_path else tf.zeros([0], tf.string)
            return labels, label_names, paths, schema_of(record[None]), n[None]

        ds = tf.data.TFRecordDataset(path).map(summarize)
        for labels, label_names, paths, schemas, n in ds:
            yield (labels.numpy(), label_names.numpy().tolist(), paths.numpy().tolist(),
                   schemas.numpy().tolist(), n.numpy())
        return

    def summarize_batch(records):
        values, (labels, label_names) = codec.decode(records, keys, with_label_names=True)
        paths = values[PATH_KEY] if has_path else tf.zeros([0], tf.string)
        return labels, label_names, paths, schema_of(records)

    def summarize_one(record):  # values of varying length: one record at a time
        values, (label, label_name) = codec.decode(record, keys, with_label_names=True)
        return label, label_name, values[PATH_KEY] if has_path else "", schema_of(record[None])[0]

    records = tf.data.TFRecordDataset(path)
    if codec.variable:
        batches = records.map(summarize_one).batch(_READ_BATCH).map(
            lambda labels, names, paths, schemas: (labels, names, paths if has_path else paths[:0], schemas))
    else:
        batches = records.batch(_READ_BATCH).map(summarize_batch)
    for labels, label_names, paths, schemas in batches:
        yield (labels.numpy(), label_names.numpy().tolist(), paths.numpy().tolist(), schemas.numpy().tolist(),
               np.ones(len(labels), np.int64))

