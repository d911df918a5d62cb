"""TFRecord shard folders: plan (pure) -> write (tfpipe.shard_writer) -> read/parse -> verify.

A shard folder holds `{split}-{i:05d}-of-{n:05d}.tfrecord` files of tf.train.Example
records (feature bytes, int64 label, source path) and the `tfpipe.json` index, written
last. This module owns the format: the planner, the reader chain `build_dataset` uses
for shard folders, the index merge for multi-host writes, and verification.
`write_shards` lives in `tfpipe.shard_writer` (it loads soundfile and librosa) and is
re-exported here.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import re
from typing import Any, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from tfpipe.core.source import INDEX_NAME, ChainInput, find, get_domain, register_folder_reader
from tfpipe.core.stage import Stage, as_stage
from tfpipe.errors import DataError

FORMAT = "tfpipe-shards"
VERSION = 1
STORES = ("log_mel", "waveform")
DTYPES = ("float16", "float32")
LABEL_KEY = "label"
PATH_KEY = "path"  # source path relative to the input folder: lets eval be checked for exactly-once
_HASH_BLOCK = 1 << 20  # 1 MiB reads when hashing shards
# Records the interleave takes from one shard before the next: amortizes its per-element hand-off
# between threads (about half the interleave's CPU per record). Records in a shard are already shuffled.
_BLOCK_RECORDS = 16


def __getattr__(name: str) -> Any:
    # The writer imports soundfile and librosa; readers of shards should not pay for that.
    if name in ("write_shards", "write_shards_with_stats"):
        from tfpipe import shard_writer

        return getattr(shard_writer, name)
    raise AttributeError(f"module 'tfpipe.shards' has no attribute {name!r}")


# --- plan ------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ShardSpec:
    """One shard of a plan.

    Attributes:
      index: shard number, 0-based.
      num_shards: shards in the whole plan.
      file: the shard's file name inside the output folder.
      examples: positions (in the source's path list) of the examples it holds, in record order.
    """

    index: int
    num_shards: int
    file: str
    examples: tuple[int, ...]


def shard_name(split: str, index: int, num_shards: int) -> str:
    """`{split}-{index:05d}-of-{num_shards:05d}.tfrecord`."""
    return f"{split}-{index:05d}-of-{num_shards:05d}.tfrecord"


def plan_shards(labels: Sequence[int], num_shards: int, *, seed: int = 0,
                split: str = "train") -> tuple[ShardSpec, ...]:
    """Assigns every example to one shard: deterministic from `seed`, balanced, classes mixed.

    Each class is shuffled and dealt round-robin across the shards, so every shard
    holds n // num_shards or n // num_shards + 1 examples and each class's count per
    shard differs by at most one between shards; each shard's records are then shuffled.
    No disk access: the plan is a pure function of its arguments.

    Args:
      labels: label id of each example (its position is the example's id).
      num_shards: how many shards to write.
      seed: the same seed gives the same plan.
      split: file name prefix ("train", "eval", ...).

    Returns:
      One ShardSpec per shard, in shard order.

    Raises:
      ValueError: fewer examples than shards, or a bad split name.
    """
    if not re.fullmatch(r"[A-Za-z0-9_.]+", split):
        raise ValueError(f"split={split!r}: use letters, digits, '_' or '.' "
                         f"(it prefixes the shard file names)")
    labels = np.asarray(labels, dtype=np.int64)
    if num_shards < 1 or num_shards > labels.size:
        raise ValueError(f"num_shards={num_shards} for {labels.size} examples: every shard needs at "
                         f"least one example; pass --num_shards between 1 and {labels.size}")
    rng = np.random.default_rng(seed)
    dealt = np.concatenate([rng.permutation(np.flatnonzero(labels == c)) for c in np.unique(labels)])
    return tuple(ShardSpec(i, num_shards, shard_name(split, i, num_shards),
                           tuple(int(e) for e in rng.permutation(dealt[i::num_shards])))
                 for i in range(num_shards))


# --- index -------------------------------------------------------------------------------

def sha256_file(path: str) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_HASH_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def write_json_atomic(path: str, value: dict) -> None:
    """Writes JSON to a temp name, fsyncs, renames: readers see the old file or the whole new one."""
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp-{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path))


def fsync_dir(path: str) -> None:
    """Makes renames inside `path` durable."""
    fd = os.open(path or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def part_name(worker_index: int, num_hosts: int) -> str:
    """File name of one host's partial index."""
    return f"tfpipe.part-{worker_index:05d}-of-{num_hosts:05d}.json"


def part_pattern(num_hosts: Optional[int] = None) -> str:
    """Glob pattern of the partial indexes of runs with num_hosts hosts (None: any run)."""
    return f"tfpipe.part-*-of-{num_hosts:05d}.json" if num_hosts else "tfpipe.part-*-of-*.json"


def part_paths(out_dir: str, num_hosts: Optional[int] = None) -> list[str]:
    """The partial indexes in out_dir matching part_pattern(num_hosts), sorted."""
    return sorted(glob.glob(os.path.join(out_dir, part_pattern(num_hosts))))


def sidecar_path(shard_path: str) -> str:
    """The per-shard manifest next to a shard: size, sha256, class counts, inputs key, rejected files."""
    return shard_path + ".json"


def stored_class_counts(source: ShardSource) -> Optional[list[int]]:
    """Examples per class from the shards' sidecar manifests; None if any is missing."""
    counts = np.zeros(len(source.class_names), np.int64)
    for path in source.paths:
        try:
            with open(sidecar_path(path)) as f:
                counts += json.load(f)["class_counts"]
        except (OSError, ValueError, KeyError):
            return None  # sidecars are not needed to read shards; counts then come from --verify
    return counts.tolist()


_HEADER_KEYS = ("format", "version", "split", "class_names", "features", "store", "dtype", "shape")
_PART_KEYS = _HEADER_KEYS + ("plan",)  # a part also records its plan: parts of other plans never mix


def merge_index(out_dir: str, num_hosts: Optional[int] = None) -> dict:
    """Writes `tfpipe.json` from the partial indexes of a multi-host `write_shards` run.

    Args:
      out_dir: the shard folder every host wrote to.
      num_hosts: the run's host count; None: the one all partial indexes in out_dir share.

    Returns:
      The merged index (also written to out_dir/tfpipe.json).

    Raises:
      DataError: a host's part is missing, parts disagree, or a listed shard is missing
        or has the wrong size; the message names it and the command to run.
    """
    out_dir = os.path.abspath(out_dir)
    parts = part_paths(out_dir, num_hosts)
    if not parts:
        raise DataError(f"{out_dir}: no partial indexes ({part_pattern(num_hosts)}) to merge; run "
                        f"`tfpipe prepare ... --worker_index I --num_hosts N` on each host first")
    loaded = [_read_json(p) for p in parts]
    counts = sorted({part["host"][1] for part in loaded})
    if len(counts) > 1:
        raise DataError(f"{out_dir}: partial indexes of runs with {' and '.join(map(str, counts))} hosts; "
                        f"merge with the --num_hosts of the run you want, or remove the other "
                        f"run's tfpipe.part-*.json files")
    num_hosts = counts[0]
    have = {part["host"][0]: part for part in loaded}
    missing = [i for i in range(num_hosts) if i not in have]
    if missing:
        raise DataError(f"{out_dir}: {len(missing)} of {num_hosts} hosts have not finished "
                        f"({part_name(missing[0], num_hosts)} is missing); run `tfpipe prepare ... "
                        f"--worker_index {missing[0]} --num_hosts {num_hosts}` and merge again")
    first = have[0]
    for i, part in sorted(have.items()):
        differ = [k for k in _PART_KEYS if part.get(k) != first.get(k)]
        if differ:
            raise DataError(f"{os.path.join(out_dir, part_name(i, num_hosts))}: {', '.join(differ)} differ "
                            f"from host 0's; every host must run the same prepare command")
    shards = sorted((s for part in have.values() for s in part["shards"]), key=lambda s: s["file"])
    planned = first.get("plan", {}).get("num_shards")
    expected = [shard_name(first["split"], i, planned) for i in range(planned)] if planned else None
    if expected is not None and [s["file"] for s in shards] != expected:
        raise DataError(f"{out_dir}: the partial indexes list {len(shards)} shards, not the {planned} of "
                        f"their plan; rerun the same tfpipe prepare command on every host")
    rejected = [r for part in have.values() for r in part["rejected"]]
    for shard in shards:
        _check_size(os.path.join(out_dir, shard["file"]), shard["bytes"], out_dir)
    index = make_index(first, shards, rejected)
    found = sum(part["found"] for part in have.values())
    check_counts(index, found)
    write_json_atomic(os.path.join(out_dir, INDEX_NAME), index)
    return index


def make_index(header: dict, shards: list[dict], rejected: list[dict]) -> dict:
    """The tfpipe.json dict, keys in the documented order, rejected inputs sorted by path."""
    index = {k: header[k] for k in ("format", "version", "split")}
    index["num_examples"] = sum(s["num_examples"] for s in shards)
    index.update({k: header[k] for k in ("class_names", "features", "store", "dtype", "shape")})
    index["shards"] = [{k: s[k] for k in ("file", "num_examples", "bytes", "sha256")} for s in shards]
    index["rejected"] = [{"path": r["path"], "reason": r["reason"]}
                         for r in sorted(rejected, key=lambda r: r["path"])]
    return index


def check_counts(index: dict, found: int) -> None:
    """found = written + rejected, or a RuntimeError (a bug, never the user's data)."""
    written, rejected = index["num_examples"], len(index["rejected"])
    if written + rejected != found:
        raise RuntimeError(f"tfpipe bug: found {found} inputs but wrote {written} and rejected {rejected}")


def _read_json(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: unreadable ({e}); rerun the tfpipe prepare command that wrote it") from e


def size_problem(path: str, expected: int) -> str:
    """'' when the shard's size on disk is the index's, else what differs (one stat, no read)."""
    try:
        actual = os.stat(path).st_size
    except OSError as e:
        return f"shard missing ({e.strerror})"
    return "" if actual == expected else f"{actual} bytes on disk but {INDEX_NAME} lists {expected}"


def _check_size(path: str, expected: int, root: str) -> None:
    """DataError naming the shard when its size on disk differs from the index."""
    problem = size_problem(path, expected)
    if problem:
        raise DataError(f"{path}: damaged shard: {problem}; rerun the same tfpipe prepare command to "
                        f"rewrite it, then `tfpipe inspect --verify {root}`")


# --- read ----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ShardSource:
    """A shard folder: TFRecord shards plus the tfpipe.json index that describes them.

    Attributes:
      root: the folder.
      paths: shard files, absolute, in index order.
      class_names: label id -> class name, as written.
      index: the parsed tfpipe.json.
    """

    root: str
    paths: tuple[str, ...]
    class_names: tuple[str, ...]
    index: dict
    labels: tuple[int, ...] = ()
    kind = "shards"

    @property
    def num_examples(self) -> int:
        return int(self.index["num_examples"])

    def chain_input(self, mode: str, features: Any = None, *, read: Any = None, process: Any = None,
                    batch_process: Any = None) -> ChainInput:
        """Shard files -> records (interleaved) -> parse (+ features from stored waveforms) -> yours.

        Raises:
          DataError: the shards store other features than `features` asks for, or a shard's
            size differs from the index (truncated or overwritten), naming the shard.
        """
        if read is not None:
            raise ValueError(f"{self.root}: read= is for files; a shard folder's records are read by "
                             f"tfpipe (pass process= or batch_process= to work on its examples)")
        index, where = self.index, os.path.join(self.root, INDEX_NAME)
        domain = get_domain("audio")
        config = domain.config(features) if features is not None else domain.config_from_dict(index["features"])
        _check_version(index, where)
        for shard, path in zip(index["shards"], self.paths):
            _check_size(path, shard["bytes"], self.root)  # damage caught before training starts
        stored = {"store": index["store"], "config": index["features"]}
        stages = [Stage("parse", _parser(index), batchable=True)]
        stages += _stored_stages(domain, stored, config, where)
        stages += [as_stage(fn, name, batchable) for fn, name, batchable in
                   ((process, "process", False), (batch_process, "batch_process", True)) if fn is not None]
        counts = tf.constant([s["num_examples"] for s in index["shards"]], tf.int64)
        files = tf.data.Dataset.from_tensor_slices((list(self.paths), counts))
        return ChainInput(files, len(self.paths), self.num_examples, tuple(stages), expand=_read_shard,
                          block_length=_BLOCK_RECORDS, count_of=lambda path, count: count)


def _stored_stages(domain, stored: dict, config: Any, where: str) -> list:
    try:
        return domain.stored_stages(stored, config)
    except DataError as e:
        raise DataError(str(e).replace("the shard index", where, 1)) from None


def read_folder(root: str) -> Optional[ShardSource]:
    """The ShardSource of a folder with tfpipe.json (None for other folders)."""
    index_path = os.path.join(root, INDEX_NAME)
    if not os.path.exists(index_path):
        return None
    try:
        with open(index_path) as f:
            index = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"{index_path}: unreadable shard index ({e}); rerun tfpipe prepare") from e
    if index.get("format") != FORMAT:
        raise DataError(f"{index_path}: not a tfpipe shard index (format={index.get('format')!r})")
    paths = tuple(os.path.join(root, s["file"]) for s in index["shards"])
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise DataError(f"{root}: {len(missing)} shard files listed in {INDEX_NAME} are missing, e.g. "
                        f"{missing[0]}; rerun the same tfpipe prepare command to finish them")
    return ShardSource(root, paths, tuple(index["class_names"]), index)


def _read_shard(path: tf.Tensor, num_examples: tf.Tensor) -> tf.data.Dataset:
    """One shard's records; a shard with fewer readable records than indexed raises, naming it."""
    # TFRecordDataset's CRC errors do not name the file. Instead a bad record ends this shard
    # (ignore_errors logs it and moves on), so the element after the last good record is the
    # `damaged` one, which raises with the shard's path. A whole shard never pulls it: take().
    records = tf.data.TFRecordDataset(path).ignore_errors(log_warning=True)
    damaged = tf.data.Dataset.from_tensors(path).map(_raise_damaged)
    return records.concatenate(damaged).take(num_examples)


def _raise_damaged(path: tf.Tensor) -> tf.Tensor:
    """Fails with a message naming the shard (only ever runs for a damaged shard)."""
    message = tf.strings.join([path, ": damaged shard: fewer readable records than ", INDEX_NAME,
                               " lists (corrupted or truncated); run `tfpipe inspect --verify` on its folder "
                               "and rerun the same tfpipe prepare command to rewrite it"])
    with tf.control_dependencies([tf.debugging.Assert(False, [message])]):
        return tf.identity(path)


def _parser(index: dict):
    """Records (one, or a batch) -> ({store: float32 values}, int64 labels)."""
    store, shape = index["store"], tuple(index["shape"])
    dtype = tf.dtypes.as_dtype(index["dtype"])
    spec = {store: tf.io.FixedLenFeature([], tf.string), LABEL_KEY: tf.io.FixedLenFeature([], tf.int64)}

    def parse(records):
        batched = records.shape.rank == 1
        parsed = tf.io.parse_example(records, spec) if batched else tf.io.parse_single_example(records, spec)
        values = tf.io.decode_raw(parsed[store], dtype, little_endian=True)
        values = tf.reshape(values, tf.concat([tf.shape(records), shape], axis=0))
        values = tf.ensure_shape(values, records.shape.concatenate(shape))
        return {store: tf.cast(values, tf.float32)}, parsed[LABEL_KEY]  # float16 on disk, float32 out

    return parse


def _check_version(index: dict, where: str) -> None:
    known = index.get("store") in STORES and index.get("dtype") in DTYPES
    if index.get("version") != VERSION or not known:
        raise DataError(f"{where}: version {index.get('version')!r}, store {index.get('store')!r}, dtype "
                        f"{index.get('dtype')!r} is not a shard format this tfpipe reads (version {VERSION}, "
                        f"store {'/'.join(STORES)}, dtype {'/'.join(DTYPES)}); rerun tfpipe prepare")


def check_features(source: ShardSource, f: Any) -> None:
    """DataError naming each field where the stored features differ from the requested ones."""
    where = os.path.join(source.root, INDEX_NAME)
    _check_version(source.index, where)
    _stored_stages(get_domain("audio"), {"store": source.index["store"], "config": source.index["features"]}, f, where)


# --- verify --------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ShardCheck:
    """What `verify_shards` found in one shard.

    Attributes:
      file: shard file name.
      problem: "" when the shard is intact, else what is wrong.
      num_records: records read (up to the first damaged one).
      class_counts: records per label id.
    """

    file: str
    problem: str
    num_records: int
    class_counts: tuple[int, ...]


def verify_shards(shard_dir: Union[str, ShardSource]) -> list[ShardCheck]:
    """Re-reads every shard: size, sha256, record count, labels, feature sizes, exactly-once paths.

    Args:
      shard_dir: a folder with tfpipe.json, or its Source.

    Returns:
      One ShardCheck per shard listed in the index, in index order.
    """
    source = find(shard_dir)
    index = source.index
    record_bytes = int(np.prod(index["shape"])) * np.dtype(index["dtype"]).itemsize
    seen: set = set()
    checks = []
    for shard, path in zip(index["shards"], source.paths):
        counts = np.zeros(len(index["class_names"]), np.int64)
        problem, n = size_problem(path, shard["bytes"]), 0
        if not problem and sha256_file(path) != shard["sha256"]:
            problem = "sha256 differs from the index"
        try:
            for labels, lengths, paths in _record_summaries(path, index["store"]):
                n += len(labels)
                if not problem and (labels.min() < 0 or labels.max() >= counts.size):
                    problem = f"label outside 0..{counts.size - 1}"
                elif not problem and (lengths != record_bytes).any():
                    wrong = lengths[lengths != record_bytes][0]
                    problem = f"a record holds {wrong} feature bytes, not {record_bytes}"
                counts += np.bincount(np.clip(labels, 0, counts.size - 1), minlength=counts.size)
                duplicate = next((p for p in paths if p in seen), None)
                if not problem and duplicate:
                    problem = f"{duplicate.decode()} is stored twice"
                seen.update(paths)
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
            problem = problem or f"unreadable record after {n} ({e.message.splitlines()[-1][:120]})"
        if not problem and n != shard["num_examples"]:
            problem = f"{n} records, index lists {shard['num_examples']}"
        checks.append(ShardCheck(shard["file"], problem, n, tuple(int(c) for c in counts)))
    return checks


def _record_summaries(path: str, store: str):
    """Yields (labels, feature byte lengths, paths) per block of a shard's records."""
    spec = {store: tf.io.FixedLenFeature([], tf.string), LABEL_KEY: tf.io.FixedLenFeature([], tf.int64),
            PATH_KEY: tf.io.FixedLenFeature([], tf.string)}

    def summarize(records):
        parsed = tf.io.parse_example(records, spec)
        return parsed[LABEL_KEY], tf.strings.length(parsed[store]), parsed[PATH_KEY]

    for labels, lengths, paths in tf.data.TFRecordDataset(path).batch(1024).map(summarize):
        yield labels.numpy(), lengths.numpy(), paths.numpy().tolist()


register_folder_reader(read_folder)
