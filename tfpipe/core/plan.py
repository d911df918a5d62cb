"""The chain's plan: from (mode, PipelineConfig, what the source yields) to the ordered steps.

Pure Python, no TensorFlow: which steps run, in which order and with which arguments (sizes,
buffers, seeds, parallelism) is decided here, in one place; `tfpipe.core.chain` applies each
step as it is given and reads nothing else. Read top to bottom, `plan()` is the optimized chain

    order (each epoch a seeded permutation: repeat + shuffle files, resumable) -> read + map
    (fused, parallel) -> batch -> batch stages -> prefetch

with one `if` per toggle, and PipelineConfig.naive() turns it into the seed question's

    map(read) -> shuffle(whole set) -> map(process) -> batch -> repeat.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence

from tfpipe.core.steps import (Batch, Cache, Distribute, FeaturesOnly, Group, Map, Mix, Options, Order, Pick,  # noqa: F401
                               Prefetch, PrefetchToDevice, ReadFiles, Rebatch, Repeat, ReuseMemory, Shard,
                               ShuffleBlocks, ShuffleExamples, ShuffleFiles, Step, Unblock)

TRAIN, EVAL, PREDICT = "train", "eval", "predict"
BLOCK_WINDOW = 1024  # examples permuted together in train windows (shuffle_buffer=0: the whole set)
# Examples up to this size are grouped: stacking a group copies each once more (~2 µs for 16 KiB),
# which pays for the ~10 µs of tf.data's per-element cost it saves. A 224 x 224 float image (588 KiB)
# cost 158 µs more grouped than not (measured, docs/examples/per_element.py).
GROUP_MAX_BYTES = 16 << 10  # 16 KiB
# The train order permutes at most this many bytes of records together: a window is copied twice
# (gathered into one block, then permuted), so 1,024 raw images of 256 KiB (256 MiB) would cost far
# more than their shuffle is worth (prepared raw photos read 0.94x the folder with such windows).
WINDOW_BYTES = 16 << 20  # 16 MiB


@dataclasses.dataclass(frozen=True)
class Yields:
    """What a source hands the chain, as far as the plan depends on it.

    Attributes:
      stages: the map stages from a file element (or a record) to (features, labels); each has
        `name`, `batchable`, `random` (tfpipe.core.stage.Stage).
      records: each file holds many records (shards, TFRecords), read by an interleave;
        False: one example per file, read by the first stage.
      blocked: the records are blocks of examples (v2 shards).
      fixed_shapes: every example has the same shape (blocks can be re-batched whole).
      num_files, num_examples: of one epoch (this input pipeline's share where sharded).
      examples_per_block: with blocked: examples in a full block.
      longest_file: records in the longest file (ordered reads take each file whole).
      block_length: records a parallel interleave takes from one file at a time (train).
      members: a mixture's members, each (its Yields, its weight); `stages` are then the ones
        the mixed examples share.
      example_bytes: bytes an example takes in the files, where known (0: not known).
    """

    stages: tuple[Any, ...]
    records: bool = False
    blocked: bool = False
    fixed_shapes: bool = True
    num_files: int = 1
    num_examples: int = 1
    examples_per_block: int = 1
    longest_file: int = 1
    block_length: int = 1
    members: tuple[tuple["Yields", float], ...] = ()
    example_bytes: int = 0


@dataclasses.dataclass(frozen=True)
class Request:
    """What the caller of build_dataset asked for beyond the PipelineConfig.

    Attributes:
      mode: "train" | "eval" | "predict".
      epochs: train: stop after this many passes (None: endless).
      start: train: the stream position (in examples) to start at; None: from 0, in the order
        the toggles pick (the resumable order is then the optimized one).
      seed: the seed every train order and shuffle of this build uses (PipelineConfig.seed, or
        one drawn for the build when that is unset).
      pipelines, pipeline: input pipelines (an InputContext) and which one this is.
      feature_key: yield features[feature_key] instead of the dict.
      device_prefetch: the consumer takes device tensors (False for an Estimator's input_fn).
      on_error: "raise" or "skip" (an example whose stages fail is left out and named).
      whole_blocks: blocks of examples may stay whole up to the batch step (False where the
        plan must end in single examples: a mixture member).
    """

    mode: str = TRAIN
    epochs: Optional[int] = None
    start: Optional[int] = None
    seed: int = 0
    pipelines: int = 1
    pipeline: int = 0
    feature_key: Optional[str] = None
    device_prefetch: bool = True
    on_error: str = "raise"
    whole_blocks: bool = True


# --- the plan --------------------------------------------------------------------------------

def split_stages(stages: Sequence[Any], vectorize: bool, first_per_example: bool = False) -> tuple[list, list]:
    """(before batch, after batch): with vectorize, the trailing batchable stages run on batches
    (all but the first with `first_per_example`)."""
    stages = list(stages)
    if not vectorize:
        return stages, []
    cut = len(stages)
    while cut > int(first_per_example) and stages[cut - 1].batchable:
        cut -= 1
    return stages[:cut], stages[cut:]


def _split(p: Any, source: Yields, request: Request) -> tuple[list, list]:
    """split_stages for this chain. The first stage (a file read) stays per example where what it
    read is kept or shuffled (a cache; a train chain off the order: the toggles' own steps) or where
    a failing example is skipped alone; else a read that takes batches runs on them too."""
    order = uses_order(p, request)
    keep = request.on_error == "skip" or (not order and (bool(p.cache) or request.mode == TRAIN))
    return split_stages(source.stages, p.vectorize, keep and not source.records)


def deterministic_prefix(stages: Sequence[Any]) -> int:
    """How many leading stages draw no random numbers (a cache may sit after them)."""
    n = 0
    while n < len(stages) and not stages[n].random:
        n += 1
    return n


def uses_order(p: Any, request: Request) -> bool:
    """The train stream is the resumable per-epoch permutation: asked for (a start), or the
    optimized order (repeat before shuffle, shuffled file names) without a cache."""
    if request.mode != TRAIN:
        return False
    return request.start is not None or (p.repeat_before_shuffle and p.shuffle_filenames and not p.cache)


def plan(p: Any, source: Yields, request: Request = Request()) -> tuple[Step, ...]:
    """The chain's steps in order, for PipelineConfig `p` over a source that yields `source`.

    Args:
      p: the PipelineConfig (toggles, batch size, buffers, cache).
      source: what the source yields (stages, files of records, blocks, sizes).
      request: mode, epochs, start, seed, sharding, feature_key, device prefetch.

    Returns:
      The steps, first to last; `tfpipe.core.chain.apply` runs them.
    """
    steps: tuple[Step, ...] = (ReuseMemory(),) if p.reuse_memory else ()
    if source.members and request.start is not None:
        raise ValueError("a mixture cannot start mid-stream (start_step): its draws depend on every member's "
                         "position; leave start_step unset (make_input_fn(..., resume=False))")
    if source.members:
        member_p = dataclasses.replace(p, vectorize=False)  # members end in examples; the shared batch follows
        member_request = dataclasses.replace(request, feature_key=None, whole_blocks=False)
        members = tuple(examples_plan(member_p, y, member_request) for y, _ in source.members)
        before, _ = split_stages(source.stages, p.vectorize)
        steps += (Mix(members, tuple(w for _, w in source.members), request.mode == TRAIN, request.seed),)
        steps += _maps(before, p, request, per_example=True)
        return steps + batches_plan(p, source, request)
    return steps + examples_plan(p, source, request) + batches_plan(p, source, request)


def examples_plan(p: Any, source: Yields, request: Request = Request()) -> tuple[Step, ...]:
    """The steps from the file list to examples (or whole windows/blocks): a mixture member's chain."""
    train, order = request.mode == TRAIN, uses_order(p, request)
    before, _ = _split(p, source, request)
    head, tail = _head_tail(p, source, before, order)
    cache = bool(p.cache) and not order
    repeat_first = train and p.repeat_before_shuffle and not cache and not order
    shuffle_files = train and p.shuffle_filenames and not cache and not order
    shuffle_examples = train and not order and (source.records or not shuffle_files or cache)
    whole = _whole(p, source, request, tail, order)
    unblock = (source.blocked or (order and source.records)) and not whole
    if not (cache or unblock or shuffle_examples):
        head, tail = head + tail, []  # nothing sits between them: one (fused) map

    steps: list[Step] = []
    if request.pipelines > 1:
        steps.append(Shard(request.pipelines, request.pipeline))
    if order:
        window = _window(p, source) if source.records else 0
        steps.append(Order(request.seed, request.start or 0, request.epochs, source.records, source.blocked,
                           window, p.parallel_reads, p.cycle_length, source.longest_file))
    if repeat_first:
        steps.append(Repeat(request.epochs, why="one stream over epochs: no refill stall"))
    if shuffle_files:
        steps.append(ShuffleFiles(source.num_files, request.seed))
    if source.records and not order:
        ordered = not train or p.deterministic
        # Ordered reads take each file whole (block as long as the longest file): the output is the
        # files in order while the other threads read the next files ahead.
        block = max(source.longest_file, 1) if not train else source.block_length
        steps.append(ReadFiles(p.parallel_reads, p.cycle_length, block, ordered))
    group = group_size(p, source, request)
    if group and not source.records:
        steps.append(Group(group, windows=False))
    steps += _maps(head, p, request, per_example=True, group=group if not tail else 0)
    if cache:
        steps.append(Cache(p.cache))
    if unblock:
        steps.append(Group(group, windows=True) if group else Unblock())
    buffer = min(p.shuffle_buffer or source.num_examples, max(1, source.num_examples))
    if shuffle_examples and whole:
        window = max(p.batch_size, min(p.shuffle_buffer or BLOCK_WINDOW, BLOCK_WINDOW))
        steps.append(ShuffleBlocks(max(2, buffer // max(1, source.examples_per_block)), window, request.seed,
                                   not train or p.deterministic))
    elif shuffle_examples:
        # After a cache: a whole-epoch shuffle before the repeat keeps epochs apart.
        steps.append(ShuffleExamples(buffer, request.seed))
    if cache and train:
        steps.append(Repeat(request.epochs, why="after the cache: each epoch replays it, reshuffled"))
    return tuple(steps) + _maps(tail, p, request, per_example=True, group=group)


def _window(p: Any, source: Yields) -> int:
    """Examples the order permutes together: shuffle_buffer (1,024), at most WINDOW_BYTES of them,
    at most an epoch."""
    by_bytes = WINDOW_BYTES // source.example_bytes if source.example_bytes else BLOCK_WINDOW
    return max(1, min(p.shuffle_buffer or BLOCK_WINDOW, by_bytes, source.num_examples))


def group_size(p: Any, source: Yields, request: Request) -> int:
    """Examples per call of the per-example map that feeds the batch (0: one call per example).

    Grouped where the stream is the endless order (a group never straddles the end of the data),
    one fused map does the per-example work, and its stages give every example the same shapes
    (so a group can be stacked, and its batches re-cut whole) of at most GROUP_MAX_BYTES.
    """
    order = uses_order(p, request)
    if not (p.group_maps and p.fuse_maps and order and request.epochs is None and request.whole_blocks
            and request.on_error != "skip"):
        return 0
    before, _ = _split(p, source, request)
    if not before or _whole(p, source, request, _head_tail(p, source, before, order)[1], order):
        return 0  # nothing per example, or whole blocks re-cut into batches
    small = 0 < before[-1].example_bytes <= GROUP_MAX_BYTES
    return p.group_size if small and all(s.fixed_shape for s in before) else 0


def batches_plan(p: Any, source: Yields, request: Request = Request()) -> tuple[Step, ...]:
    """The steps from examples to what the consumer takes: batch, batch stages, the tail."""
    train, order = request.mode == TRAIN, uses_order(p, request)
    before, after = _split(p, source, request)
    _, tail = _head_tail(p, source, before, order)
    drop = train and p.drop_remainder
    steps: list[Step] = []
    if not source.members and (_whole(p, source, request, tail, order) or group_size(p, source, request)):
        steps.append(Rebatch(p.batch_size, drop))
    else:
        # Length buckets reorder examples: train only (eval and predict keep input order).
        steps.append(Batch(p.batch_size, drop, p.bucket_boundaries if train else (), p.bucket_key))
    steps += _maps(after, p, request)
    if train and not p.repeat_before_shuffle and not order and not p.cache:
        steps.append(Repeat(request.epochs, why="the seed's order: batch, then repeat"))
    if request.feature_key is not None:
        steps.append(Pick(request.feature_key))
    if request.mode == PREDICT:
        steps.append(FeaturesOnly())
    options = options_step(p, request.mode)
    if p.data_service:
        # Options must be on the part the workers run: those set after distribute stay local.
        steps += [options, Distribute(p.data_service, p.data_service_mode, p.data_service_job, p.cache, not train,
                                       request.pipelines > 1)]
    if p.prefetch:
        steps.append(Prefetch())
    if p.prefetch_to_device and request.device_prefetch:
        steps.append(PrefetchToDevice())
    return tuple(steps) + (options,)


def options_step(p: Any, mode: str) -> Options:
    """The tf.data options of a chain in `mode`: order kept unless train allows otherwise; rewrites follow the toggles."""
    return Options(mode != TRAIN or p.deterministic, p.parallel_map, p.parallel_map, p.prefetch)


def _head_tail(p: Any, source: Yields, before: Sequence[Any], order: bool) -> tuple[list, list]:
    """Per-example stages before / after the cache and the example shuffle.

    With a cache in memory or a file: every stage up to the first random one runs before it
    (so a random crop is drawn anew each epoch). A snapshot on disk keeps what the first stage
    read (the file's bytes: compact, and a graph tf.data fingerprints the same way every build,
    where decode functions with branches are not). Otherwise, one example per file: the first
    stage reads the file before the example shuffle (the seed's map(read) -> shuffle), or with
    fuse_maps the one fused map does; records: every stage runs after the shuffle.
    """
    if p.cache.startswith("snapshot:") and not order:
        cut = 0 if source.records else min(1, deterministic_prefix(before))
    elif p.cache and not order:
        cut = deterministic_prefix(before)
    elif source.records:
        cut = 0
    else:
        cut = len(before) if p.fuse_maps else min(1, len(before))
    return list(before[:cut]), list(before[cut:])


def _whole(p: Any, source: Yields, request: Request, tail: Sequence[Any], order: bool) -> bool:
    """Blocks (or the order's windows) cross the chain whole, re-cut into batches, when nothing per
    example follows and every example has one shape."""
    if not (source.records and source.fixed_shapes and not tail and request.whole_blocks):
        return False
    if order:
        return True
    return source.blocked and (request.mode != TRAIN or getattr(p, "shuffle_blocks", False))


def _maps(stages: Sequence[Any], p: Any, request: Request, per_example: bool = False,
          group: int = 0) -> tuple[Step, ...]:
    """One map step per stage, or one fused map for all of them (fuse_maps), over groups of `group`."""
    if not stages:
        return ()
    ordered = request.mode != TRAIN or p.deterministic
    skip = per_example and request.on_error == "skip"
    if p.fuse_maps:
        return (Map(tuple(stages), p.parallel_map, ordered, per_example, skip, group),)
    return tuple(Map((s,), p.parallel_map, ordered, per_example, skip) for s in stages)


def describe(steps: Sequence[Step], why: bool = False) -> str:
    """The plan as one line ('order(seed=0) -> map(read+decode, ...) -> batch(size=64) -> ...'), or with
    why=True one line per step with the reason it is there."""
    if not why:
        return " -> ".join(map(str, steps))
    return "\n".join(f"{i:2d}. {s}" + (f"\n      why: {s.why}" if s.why else "") for i, s in enumerate(steps, 1))


