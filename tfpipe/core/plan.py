"""The chain's plan: from (mode, PipelineConfig, what the source yields) to the ordered steps.

Pure Python, no TensorFlow: which steps run and in which order is decided here, in one
place, and `tfpipe.core.chain` applies the steps one by one. Read top to bottom, `plan()`
is the optimized chain

    files -> repeat -> shuffle files -> read (fused, parallel) -> batch -> batch stages -> prefetch

with one `if` per toggle, and PipelineConfig.naive() turns it into the seed question's

    map(read) -> shuffle(whole set) -> map(process) -> batch -> repeat.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence

TRAIN, EVAL, PREDICT = "train", "eval", "predict"


@dataclasses.dataclass(frozen=True)
class Yields:
    """What a source hands the chain, as far as the order of steps depends on it.

    Attributes:
      stages: the map stages from a file element (or a record) to (features, labels); each has
        `name`, `batchable`, `random` (tfpipe.core.stage.Stage).
      records: each file holds many records (shards, TFRecords), read by an interleave;
        False: one example per file, read by the first stage.
      blocked: the records are blocks of examples (v2 shards): examples never need to cross
        tf.data one at a time when the stages after them all work on batches.
      fixed_shapes: every example has the same shape (blocks can be re-batched whole).
      mixture: examples are drawn from several members, each with its own chain up to
        examples; `stages` are the ones the mixed examples share.
    """

    stages: tuple[Any, ...]
    records: bool = False
    blocked: bool = False
    fixed_shapes: bool = True
    mixture: bool = False


@dataclasses.dataclass(frozen=True)
class Step:
    """One step of the chain: `op` names what chain.py does; the other fields are its arguments.

    ops: mix, shard, resume, repeat, shuffle_files, read_files, map, cache, unblock, shuffle_examples,
    shuffle_blocks, batch, rebatch, pick, features_only, distribute, prefetch, prefetch_to_device.
    """

    op: str
    stages: tuple[Any, ...] = ()
    count: Optional[int] = None  # repeat: epochs (None: endless)
    parallel: bool = False  # map / read_files: num_parallel_calls=AUTOTUNE
    drop_remainder: bool = False  # batch / rebatch
    per_example: bool = False  # map: runs on one example at a time (on_error="skip" guards these)
    note: str = ""  # why the step is there, shown by describe()

    def __str__(self) -> str:
        names = "+".join(s.name for s in self.stages)
        return f"{self.op}({names})" if names else self.op


@dataclasses.dataclass(frozen=True)
class Request:
    """What the caller of build_dataset asked for beyond the PipelineConfig.

    Attributes:
      mode: "train" | "eval" | "predict".
      epochs: train: stop after this many passes (None: endless).
      resume: train: start mid-stream with the resumable (index-based) order.
      sharded: several input pipelines (an InputContext): each reads its share of the files.
      feature_key: yield features[feature_key] instead of the dict.
      device_prefetch: the consumer takes device tensors (False for an Estimator's input_fn).
      on_error: "raise" (an example whose stages fail stops the pipeline) or "skip" (it is
        left out, and named on stderr with a running count).
      whole_blocks: blocks of examples may stay whole up to the batch step (False where the
        plan must end in single examples: a mixture member).
    """

    mode: str = TRAIN
    epochs: Optional[int] = None
    resume: bool = False
    sharded: bool = False
    feature_key: Optional[str] = None
    device_prefetch: bool = True
    on_error: str = "raise"
    whole_blocks: bool = True


def split_stages(stages: Sequence[Any], vectorize: bool) -> tuple[list, list]:
    """(before batch, after batch): with vectorize, the trailing batchable stages run on batches."""
    stages = list(stages)
    if not vectorize:
        return stages, []
    cut = len(stages)
    while cut > 0 and stages[cut - 1].batchable:
        cut -= 1
    return stages[:cut], stages[cut:]


def deterministic_prefix(stages: Sequence[Any]) -> int:
    """How many leading stages draw no random numbers (a cache may sit after them)."""
    n = 0
    while n < len(stages) and not stages[n].random:
        n += 1
    return n


def plan(p: Any, source: Yields, request: Request = Request()) -> tuple[Step, ...]:
    """The chain's steps in order, for PipelineConfig `p` over a source that yields `source`.

    Args:
      p: the PipelineConfig (toggles, batch size, cache).
      source: what the source yields (stages, files of records, blocks).
      request: mode, epochs, resume, sharding, feature_key, device prefetch.

    Returns:
      The steps, first to last; `tfpipe.core.chain.apply` runs them.
    """
    if source.mixture:  # each member's examples_plan runs inside the mix step
        before, _ = split_stages(source.stages, p.vectorize)
        return (Step("mix", note="examples drawn from the members by weight"),) + _maps(
            before, p, per_example=True) + batches_plan(p, source, request)
    return examples_plan(p, source, request) + batches_plan(p, source, request)


def examples_plan(p: Any, source: Yields, request: Request = Request()) -> tuple[Step, ...]:
    """The steps from the file list to (unbatched) examples: a mixture member's whole chain."""
    train, resume = request.mode == TRAIN, request.mode == TRAIN and request.resume
    before, _ = split_stages(source.stages, p.vectorize)
    head, tail = _head_tail(p, source, before)
    # A cache must see one finite epoch in a fixed order: repeat and the file shuffle follow it.
    # The resumable order permutes and repeats the files itself.
    cache = bool(p.cache) and not resume
    repeat_first = train and p.repeat_before_shuffle and not cache and not resume
    shuffle_files = train and p.shuffle_filenames and not cache and not resume
    shuffle_examples = train and not resume and (source.records or not shuffle_files)
    blocks_whole = _blocks_whole(p, source, request, tail)
    unblock = source.blocked and not blocks_whole and not resume
    if not (cache or unblock or shuffle_examples):
        head, tail = head + tail, []  # nothing sits between them: one (fused) map

    steps = []
    if request.sharded:
        steps.append(Step("shard", note="each input pipeline reads a disjoint share of the files"))
    if resume:
        steps.append(Step("resume", note="endless; each epoch's file order drawn from (seed, epoch)"))
    if repeat_first:
        steps.append(Step("repeat", count=request.epochs, note="one stream over epochs: no refill stall"))
    if shuffle_files:
        steps.append(Step("shuffle_files", note="paths are cheap to buffer; decoded data is not"))
    if source.records and not resume:
        steps.append(Step("read_files", parallel=p.parallel_reads, note="records of many files at once"))
    steps += _maps(head, p, per_example=True)
    if cache:
        steps.append(Step("cache", note="one epoch of examples, before any random stage"))
        if train and p.repeat_before_shuffle:
            steps.append(Step("repeat", count=request.epochs))
    if unblock:
        steps.append(Step("unblock", note="blocks -> examples, after the interleave handed over whole blocks"))
    if shuffle_examples and blocks_whole:
        steps.append(Step("shuffle_blocks", note="whole blocks, then one permutation per window of them"))
    elif shuffle_examples:
        steps.append(Step("shuffle_examples", note="decoded examples (or records): a big buffer"))
    return tuple(steps) + _maps(tail, p, per_example=True)


def batches_plan(p: Any, source: Yields, request: Request = Request()) -> tuple[Step, ...]:
    """The steps from examples to what the consumer takes: batch, batch stages, the tail."""
    train, resume = request.mode == TRAIN, request.mode == TRAIN and request.resume
    before, after = split_stages(source.stages, p.vectorize)
    _, tail = _head_tail(p, source, before)
    drop = train and p.drop_remainder
    steps = []
    if _blocks_whole(p, source, request, tail):
        steps.append(Step("rebatch", drop_remainder=drop, note="blocks re-cut into batches, no example alone"))
    else:
        steps.append(Step("batch", drop_remainder=drop))
    steps += _maps(after, p)
    if train and not p.repeat_before_shuffle and not resume:
        steps.append(Step("repeat", count=request.epochs, note="the seed's order: batch, then repeat"))
    if request.feature_key is not None:
        steps.append(Step("pick"))
    if request.mode == PREDICT:
        steps.append(Step("features_only"))
    if p.data_service:
        steps.append(Step("distribute", note="the tf.data service runs everything above"))
    if p.prefetch:
        steps.append(Step("prefetch", note="the next batch is made while the model trains on this one"))
    if p.prefetch_to_device and request.device_prefetch:
        steps.append(Step("prefetch_to_device", note="only where a GPU is visible"))
    return tuple(steps)


def _head_tail(p: Any, source: Yields, before: Sequence[Any]) -> tuple[list, list]:
    """Per-example stages before / after the cache and the example shuffle.

    With a cache in memory or a file: every stage up to the first random one runs before it
    (so a random crop is drawn anew each epoch). A snapshot on disk keeps what the first stage
    read (the file's bytes: compact, and a graph tf.data fingerprints the same way every build,
    where decode functions with branches are not). Otherwise, one example per file: the first
    stage reads the file before the example shuffle (the seed's map(read) -> shuffle), or with
    fuse_maps the one fused map does; records: every stage runs after the shuffle.
    """
    if p.cache.startswith("snapshot:"):
        cut = 0 if source.records else min(1, deterministic_prefix(before))
    elif p.cache:
        cut = deterministic_prefix(before)
    elif source.records:
        cut = 0
    else:
        cut = len(before) if p.fuse_maps else min(1, len(before))
    return list(before[:cut]), list(before[cut:])


def _blocks_whole(p: Any, source: Yields, request: Request, tail: Sequence[Any]) -> bool:
    """Blocks cross the chain whole (shuffled as blocks, re-cut into batches) when nothing per example follows."""
    if not (source.blocked and source.fixed_shapes and not tail and not request.resume and request.whole_blocks):
        return False
    return request.mode != TRAIN or getattr(p, "shuffle_blocks", False)


def _maps(stages: Sequence[Any], p: Any, per_example: bool = False) -> tuple[Step, ...]:
    """One map step per stage, or one fused map for all of them (fuse_maps)."""
    if not stages:
        return ()
    if p.fuse_maps:
        return (Step("map", tuple(stages), parallel=p.parallel_map, per_example=per_example),)
    return tuple(Step("map", (s,), parallel=p.parallel_map, per_example=per_example) for s in stages)


def describe(steps: Sequence[Step]) -> str:
    """The plan as one line: 'repeat -> shuffle_files -> map(read) -> batch -> ...'."""
    return " -> ".join(map(str, steps))
