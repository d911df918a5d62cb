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

from tfpipe import audio, sources
from tfpipe.config import FeatureConfig, PipelineConfig
from tfpipe.errors import DataError
from tfpipe.pipeline import AUTOTUNE, TRAIN, apply_maps, compose, shard_for_input_context

FORMAT = "tfpipe-shards"
VERSION = 1
INDEX_NAME = sources.INDEX_NAME
STORES = ("log_mel", "waveform")
DTYPES = ("float16", "float32")
LABEL_KEY = "label"
PATH_KEY = "path"  # source path relative to the input folder: lets eval be checked for exactly-once
# Fields that fix the stored values: shards are reusable only by a pipeline asking for the same ones.
_LOG_MEL_FIELDS = ("sample_rate", "clip_seconds", "n_fft", "hop_length", "n_mels", "fmin", "fmax",
                   "log_offset")
_WAVEFORM_FIELDS = ("sample_rate", "clip_seconds")
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


def stored_class_counts(source: sources.Source) -> Optional[list[int]]:
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

def shard_chain(source: sources.Source, mode: str, p: PipelineConfig, f: FeatureConfig,
                input_context: Optional[tf.distribute.InputContext]) -> tf.data.Dataset:
    """Shard files -> batches of ({key: float32}, int64 labels), before build_dataset's shared tail.

    Args:
      source: a shard folder's Source (its parsed index and shard paths).
      mode: "train" (endless, shuffled) or "eval"/"predict" (one ordered pass, last batch kept).
      p: the toggles; the tail (naive-order repeat, prefetch, options) is build_dataset's.
      f: the features asked for; must match what the shards store.
      input_context: each input pipeline then reads a disjoint subset of the shards.

    Returns:
      The dataset before build_dataset's shared tail.

    Raises:
      DataError: the shards store other features than `f` asks for, or a shard's size
        differs from the index (truncated or overwritten), naming the shard.
    """
    index = source.index
    check_features(source, f)
    for shard, path in zip(index["shards"], source.paths):
        _check_size(path, shard["bytes"], source.root)  # damage caught before training starts
    train = mode == TRAIN
    ordered = not train or p.deterministic
    counts = tf.constant([s["num_examples"] for s in index["shards"]], tf.int64)
    ds = tf.data.Dataset.from_tensor_slices((list(source.paths), counts))
    ds = shard_for_input_context(ds, len(source.paths), input_context)
    # A cache must see one finite epoch in a fixed order, so repeat and file shuffle follow it.
    reshuffle_files = train and p.shuffle_filenames and not p.cache

    if train and p.repeat_before_shuffle and not p.cache:
        ds = ds.repeat()  # one endless stream: no refill stall at epoch ends
    if reshuffle_files:
        ds = ds.shuffle(len(source.paths), seed=p.seed)  # shard names are cheap to shuffle
    if p.parallel_reads:
        ds = ds.interleave(_read_shard, cycle_length=min(p.cycle_length, len(source.paths)),
                           block_length=_BLOCK_RECORDS, num_parallel_calls=AUTOTUNE, deterministic=ordered)
    else:
        ds = ds.flat_map(_read_shard)
    if p.cache:
        ds = ds.cache("" if p.cache == "memory" else p.cache)  # serialized: float16 is half of parsed
        if train and p.repeat_before_shuffle:
            ds = ds.repeat()
    if train:
        # Records are mixed within and across shards, but neighbours come from the same few shards.
        ds = ds.shuffle(p.shuffle_buffer or index["num_examples"], seed=p.seed)
    stages = _shard_stages(index, p, f)
    if p.vectorize:  # one parse_example + decode_raw per batch instead of per record
        ds = ds.batch(p.batch_size, drop_remainder=train and p.drop_remainder)
        return apply_maps(ds, stages, p, ordered)
    ds = apply_maps(ds, stages, p, ordered)
    return ds.batch(p.batch_size, drop_remainder=train and p.drop_remainder)


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


def _shard_stages(index: dict, p: PipelineConfig, f: FeatureConfig) -> list:
    """The map functions after reading: parse (+ features from stored waveforms), fused per fuse_maps."""
    store, shape = index["store"], tuple(index["shape"])
    dtype = tf.dtypes.as_dtype(index["dtype"])
    spec = {store: tf.io.FixedLenFeature([], tf.string), LABEL_KEY: tf.io.FixedLenFeature([], tf.int64)}

    def parse(records):
        batched = records.shape.rank == 1
        parsed = tf.io.parse_example(records, spec) if batched else tf.io.parse_single_example(records, spec)
        values = tf.io.decode_raw(parsed[store], dtype, little_endian=True)
        values = tf.reshape(values, tf.concat([tf.shape(records), shape], axis=0))
        values = tf.ensure_shape(values, records.shape.concatenate(shape))
        return tf.cast(values, tf.float32), parsed[LABEL_KEY]  # float16 on disk, float32 out

    computes = store == "waveform" and f.output == "log_mel"  # log-mel from stored waveforms

    def featurize(values, labels):
        if computes:
            values = audio.compute_features(values, f)
        return {f.feature_key: values}, labels

    if p.fuse_maps or not computes:
        return [compose(parse, featurize)]
    return [parse, featurize]


def check_features(source: sources.Source, f: FeatureConfig) -> None:
    """DataError naming each field where the stored features differ from the requested ones."""
    index, where = source.index, os.path.join(source.root, INDEX_NAME)
    known = index.get("store") in STORES and index.get("dtype") in DTYPES
    if index.get("version") != VERSION or not known:
        raise DataError(f"{where}: version {index.get('version')!r}, store {index.get('store')!r}, dtype "
                        f"{index.get('dtype')!r} is not a shard format this tfpipe reads (version {VERSION}, "
                        f"store {'/'.join(STORES)}, dtype {'/'.join(DTYPES)}); rerun tfpipe prepare")
    if index["store"] == "log_mel" and f.output == "waveform":
        raise DataError(f"{where}: the shards store log-mel features but FeatureConfig.output='waveform' "
                        f"asks for waveforms; rerun `tfpipe prepare --store waveform` "
                        f"or ask for output='log_mel'")
    stored = index["features"]
    fields = _LOG_MEL_FIELDS if index["store"] == "log_mel" else _WAVEFORM_FIELDS
    differ = [(k, stored.get(k), getattr(f, k)) for k in fields if stored.get(k) != getattr(f, k)]
    if differ:
        listed = ", ".join(f"{k}={have!r} (pipeline asks for {want!r})" for k, have, want in differ)
        flags = " ".join(f"--{k} {have}" for k, have, _ in differ)
        raise DataError(f"{where}: the shards were written with {listed}; rerun tfpipe prepare with the "
                        f"pipeline's values, or pass the shards' values to the pipeline ({flags})")


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


def verify_shards(shard_dir: Union[str, sources.Source]) -> list[ShardCheck]:
    """Re-reads every shard: size, sha256, record count, labels, feature sizes, exactly-once paths.

    Args:
      shard_dir: a folder with tfpipe.json, or its Source.

    Returns:
      One ShardCheck per shard listed in the index, in index order.
    """
    source = sources.find_examples(shard_dir)
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
