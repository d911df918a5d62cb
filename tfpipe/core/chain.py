"""build_dataset: THE chain. Every source (a domain's files, your own files and functions,
shard folders, TFRecords, mixtures) goes through it.

The order of the steps is decided by the pure plan (`tfpipe.core.plan`); this module applies
it, one small function per step, in chain order:

  shard -> resume | repeat -> shuffle files -> read files -> maps -> cache -> unblock
  -> shuffle examples | shuffle blocks -> maps -> batch | rebatch -> batch maps -> repeat (naive)
  -> pick -> features only -> distribute -> prefetch -> prefetch to device
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, Sequence

import tensorflow as tf

from tfpipe.config import PipelineConfig
from tfpipe.core import cache as cache_lib
from tfpipe.core import memory
from tfpipe.core import registry
from tfpipe.core import resume as resume_lib
from tfpipe.core.chain_input import ChainInput
from tfpipe.core.mixture import mix_datasets
from tfpipe.core.plan import EVAL, PREDICT, TRAIN, Request, Step, examples_plan, plan, split_stages  # noqa: F401
from tfpipe.core.source import find
from tfpipe.core.stage import fuse
from tfpipe.core.transforms import apply_stage, batch, permute_window, shard_for_input_context, skip_failures

AUTOTUNE = tf.data.AUTOTUNE
_MODES = {TRAIN: TRAIN, EVAL: EVAL, PREDICT: PREDICT, "infer": PREDICT}
_BLOCK_WINDOW = 1024  # examples permuted together by shuffle_blocks (at least one batch)


def normalize_mode(mode: str) -> str:
    """'train' | 'eval' | 'predict' from those names or tf.estimator.ModeKeys values."""
    if not isinstance(mode, str) or mode not in _MODES:
        raise ValueError(f"mode={mode!r}: allowed values are 'train', 'eval', 'predict' "
                         f"(or tf.estimator.ModeKeys.TRAIN/EVAL/PREDICT)")
    return _MODES[mode]


def build_dataset(data: Any, mode: str = TRAIN, pipeline: Optional[PipelineConfig] = None,
                  features: Any = None, input_context: Optional[tf.distribute.InputContext] = None, *,
                  read: Any = None, process: Any = None, batch_process: Any = None,
                  feature_key: Optional[str] = None, epochs: Optional[int] = None,
                  start_step: Optional[int] = None, allow_device_prefetch: bool = True,
                  on_error: str = "raise") -> tf.data.Dataset:
    """Builds the input pipeline over any files and functions, every optimization behind its toggle.

    Args:
      data: a folder with one subfolder per class (the domain is found from the files:
        .wav audio, .jpg/.png images), a CSV manifest (path,label), a glob pattern, a shard
        folder (tfpipe.json), `(paths, labels)`, a list of paths (predict), or a Source
        (e.g. `tfpipe.records(...)`, `tfpipe.mix(...)`).
      mode: "train" (endless, shuffled), "eval" (one ordered pass, every example once,
        last partial batch kept) or "predict" (as eval, features only); tf.estimator.ModeKeys
        values work too.
      pipeline: which optimizations to apply; default PipelineConfig.optimized().
      features: the domain's config (AudioConfig, ImageConfig); default: the domain's
        default, or for a shard folder the config its index records.
      input_context: from tf.distribute / Estimator; each input pipeline then reads a
        disjoint subset of the files.
      read: your `(path, label) -> element` function, run once per file (replaces the domain's).
      process: your `(*element) -> (features, label)` function, run per example.
      batch_process: your `(features, labels) -> (features, labels)` function; with
        `vectorize` it runs once per batch after batching, otherwise per example.
        Each of these is TF-traceable, or a plain numpy function wrapped by tfpipe.python_fn.
      feature_key: yield `features[feature_key]` (a plain tensor, e.g. for a Keras model with
        one input) instead of the features dict.
      epochs: train mode only: stop after this many passes (Keras `fit` without
        steps_per_epoch); default endless.
      start_step: train mode only: use the resumable order (each epoch a permutation of
        the files drawn from `pipeline.seed`, default seed 0) and start at this step: the
        stream is exactly batches start_step, start_step + 1, ... of the stream started at
        0 (with deterministic=True; otherwise the same examples per epoch), and nothing
        before it is read. The shuffle toggles do not apply to this order.
      allow_device_prefetch: False where the consumer needs host tensors (Estimator's
        input_fn); prefetch_to_device is then skipped.
      on_error: "raise" (default): an example whose per-example stages fail stops the pipeline
        with TensorFlow's error (your functions' ops are named "read.FN", "process.FN" in it;
        a python_fn names the file). "skip": such an example is left out and named on stderr
        with a running count (never a silent drop); each example then crosses a small
        dataset of its own, which costs time: use it to find or ride over a few bad files.

    Returns:
      A dataset of `(features, labels)` batches; features is a dict (the domain's keys, or
      what your functions return), labels int64 [batch]. Elements whose shapes differ are
      padded to the batch's largest (padded_batch), or per length bucket with
      `pipeline.bucket_boundaries`. In predict mode, features only.

    Raises:
      ValueError / tfpipe.DataError: unusable data or arguments, naming the file and the fix.
    """
    pipeline, mode = check_args(pipeline, mode, epochs, start_step, feature_key)
    start = None if start_step is None else start_step * pipeline.batch_size
    return build(data, mode, pipeline, features, input_context, read=read, process=process,
                 batch_process=batch_process, feature_key=feature_key, epochs=epochs, start_example=start,
                 allow_device_prefetch=allow_device_prefetch, on_error=on_error)


def build(data: Any, mode: str, pipeline: PipelineConfig, features: Any = None,
          input_context: Optional[tf.distribute.InputContext] = None, *, read: Any = None, process: Any = None,
          batch_process: Any = None, feature_key: Optional[str] = None, epochs: Optional[int] = None,
          start_example: Optional[int] = None, allow_device_prefetch: bool = True,
          on_error: str = "raise") -> tf.data.Dataset:
    """build_dataset with checked arguments and the resume position in examples (make_input_fn's ledger)."""
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error={on_error!r}: allowed values are 'raise' and 'skip'")
    inputs = find(data).chain_input(mode, features, read=read, process=process, batch_process=batch_process)
    request = Request(mode, epochs, start_example is not None, _sharded(input_context), feature_key,
                      allow_device_prefetch, on_error)
    return apply(plan(pipeline, inputs.yields, request), inputs, pipeline, request,
                 input_context=input_context, start_example=start_example or 0)


def check_args(pipeline: Any, mode: Any, epochs: Any, start_step: Any,
               feature_key: Any = None) -> tuple[PipelineConfig, str]:
    """(pipeline, mode) checked; ValueError naming the argument, its value and what is allowed."""
    if pipeline is None:
        pipeline = PipelineConfig.optimized()
    if isinstance(pipeline, str):
        raise ValueError(f"pipeline={pipeline!r}: pass a PipelineConfig, e.g. "
                         f"tfpipe.PipelineConfig.preset({pipeline!r}) or PipelineConfig.{pipeline}()")
    if not isinstance(pipeline, PipelineConfig):
        raise ValueError(f"pipeline={type(pipeline).__name__}: pass a PipelineConfig (PipelineConfig.optimized(**fields) "
                         f"or dataclasses.replace(config, field=value))")
    mode = normalize_mode(mode)
    for name, value in (("epochs", epochs), ("start_step", start_step)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise ValueError(f"{name}={value!r}: expected a whole number (int), got {type(value).__name__}")
    if epochs is not None and (mode != TRAIN or epochs < 1):
        raise ValueError(f"epochs={epochs!r}: only for mode='train', and >= 1 (eval is always one pass)")
    if start_step is not None and (mode != TRAIN or start_step < 0 or epochs is not None):
        raise ValueError(f"start_step={start_step!r}: only for an endless mode='train' stream, and >= 0")
    if start_step is not None and pipeline.cache:
        raise ValueError(f"start_step={start_step!r} with cache={pipeline.cache!r}: a cache replays one epoch in "
                         f"a fixed order, while resuming needs the order to start anywhere; drop the cache "
                         f"(cache='') or start from the beginning (no start_step / make_input_fn(resume=False))")
    if feature_key is not None and not isinstance(feature_key, str):
        raise ValueError(f"feature_key={feature_key!r}: expected the name of one feature (a str)")
    return pipeline, mode


@dataclasses.dataclass(frozen=True)
class _Context:
    """What the steps read besides the dataset: the source's input, the config, the request."""

    inputs: ChainInput
    p: PipelineConfig
    request: Request
    input_context: Optional[tf.distribute.InputContext]
    start_example: int

    @property
    def ordered(self) -> bool:
        """Parallel steps keep their order (eval, predict, or deterministic train)."""
        return self.request.mode != TRAIN or self.p.deterministic


def apply(steps: Sequence[Step], inputs: ChainInput, p: PipelineConfig, request: Request, *,
          input_context: Optional[tf.distribute.InputContext] = None, start_example: int = 0) -> tf.data.Dataset:
    """Runs the plan's steps over the source's file table; the chain's options last."""
    ctx = _Context(inputs, p, request, input_context, start_example)
    check_not_empty(inputs, p, request, steps, input_context.num_input_pipelines if request.sharded else 1)
    if p.reuse_memory:
        memory.reuse_large_buffers()  # the process's malloc: big batches reuse freed buffers
    return run_steps(inputs.files, steps, ctx).with_options(chain_options(request.mode, p))


def run_steps(ds: tf.data.Dataset, steps: Sequence[Step], ctx: "_Context") -> tf.data.Dataset:
    """Each step's function, in order."""
    for step in steps:
        ds = _STEPS[step.op](ds, step, ctx)
    return ds


def check_not_empty(inputs: ChainInput, p: PipelineConfig, request: Request, steps: Sequence[Step],
                    pipelines: int = 1) -> None:
    """ValueError when a train stream with drop_remainder would never yield a batch.

    The naive order (batch, then repeat) with more batch than data drops every example of
    each pass: an "endless" stream that ends at once, and an Estimator that trains 0 steps.
    """
    if request.mode != TRAIN or not p.drop_remainder:
        return
    before_batch = steps[:next(i for i, s in enumerate(steps) if s.op in ("batch", "rebatch"))]
    if any(s.op == "resume" or (s.op == "repeat" and s.count is None) for s in before_batch):
        return  # endless before batching: batches span epochs
    passes = next((s.count for s in before_batch if s.op == "repeat"), 1)
    share = inputs.num_examples // pipelines
    if share * passes < p.batch_size:
        raise ValueError(f"{inputs.num_examples} examples ({share} per input pipeline, {passes} pass(es) before "
                         f"batching) but batch_size={p.batch_size} with drop_remainder: every example would be "
                         f"dropped and the train stream would be empty; lower batch_size, set "
                         f"drop_remainder=False, or set repeat_before_shuffle=True (repeat before batching)")


def _sharded(input_context: Optional[tf.distribute.InputContext]) -> bool:
    return input_context is not None and input_context.num_input_pipelines > 1


# --- the steps, in chain order ------------------------------------------------------------

def _mix(ds, step: Step, ctx: _Context):
    """Each member's own chain up to examples (its stages per example), then drawn by weight."""
    if ctx.request.resume:
        raise ValueError("a mixture cannot start mid-stream (start_step): its draws depend on every member's "
                         "position; leave start_step unset (make_input_fn(..., resume=False))")
    member_p = dataclasses.replace(ctx.p, vectorize=False)  # members' stages run before the shared batch
    request = dataclasses.replace(ctx.request, feature_key=None, whole_blocks=False)
    datasets = []
    for inputs, _ in ctx.inputs.members:
        member = dataclasses.replace(ctx, inputs=inputs, p=member_p, request=request)
        datasets.append(run_steps(inputs.files, examples_plan(member_p, inputs.yields, request), member))
    weights = [w for _, w in ctx.inputs.members]
    return mix_datasets(datasets, weights, train=ctx.request.mode == TRAIN, seed=ctx.p.seed)


def _shard(ds, step: Step, ctx: _Context):
    return shard_for_input_context(ds, ctx.inputs.num_files, ctx.input_context)


def _resume(ds, step: Step, ctx: _Context):
    return resume_lib.stream(ds, ctx.inputs, ctx.p.seed or 0, ctx.start_example)


def _repeat(ds, step: Step, ctx: _Context):
    return ds.repeat(step.count)


def _shuffle_files(ds, step: Step, ctx: _Context):
    return ds.shuffle(ctx.inputs.num_files, seed=ctx.p.seed)


def _read_files(ds, step: Step, ctx: _Context):
    inputs, p = ctx.inputs, ctx.p
    if not step.parallel:
        return ds.flat_map(inputs.expand)
    cycle = min(p.cycle_length, inputs.num_files) if p.cycle_length else AUTOTUNE  # 0: the usable cores
    block = inputs.block_length
    if ctx.request.mode != TRAIN and inputs.records_per_file:
        # A block as long as the longest file: the output is each file whole, in file order, while
        # the other threads read the next files ahead.
        block = max(max(inputs.records_per_file), 1)
    return ds.interleave(inputs.expand, cycle_length=cycle, block_length=block,
                         num_parallel_calls=AUTOTUNE, deterministic=ctx.ordered)


def _map(ds, step: Step, ctx: _Context):
    stage = fuse(step.stages)
    if step.per_example and ctx.request.on_error == "skip":
        return skip_failures(ds, stage, ctx.ordered)
    return apply_stage(ds, stage, step.parallel, ctx.ordered)


def _cache(ds, step: Step, ctx: _Context):
    return cache_lib.cache(ds, ctx.p.cache, ctx.inputs)


def _unblock(ds, step: Step, ctx: _Context):
    return ds.unbatch()


def _shuffle_examples(ds, step: Step, ctx: _Context):
    # A buffer larger than one epoch would only mix epochs (and repeat examples within a batch).
    n = max(1, ctx.inputs.num_examples)
    return ds.shuffle(min(ctx.p.shuffle_buffer or n, n), seed=ctx.p.seed)


def _shuffle_blocks(ds, step: Step, ctx: _Context):
    """Blocks shuffled whole, then re-cut into windows whose examples are permuted in one op each.

    No example crosses tf.data on its own: a window of `_BLOCK_WINDOW` examples (at least a
    batch) is gathered in a random order, and `rebatch` cuts batches from the windows.
    """
    p = ctx.p
    block = max(1, ctx.inputs.examples_per_block)
    window = max(p.batch_size, min(p.shuffle_buffer or _BLOCK_WINDOW, _BLOCK_WINDOW))
    ds = ds.shuffle(max(2, (p.shuffle_buffer or ctx.inputs.num_examples) // block), seed=p.seed)
    ds = ds.rebatch(window)
    return ds.map(permute_window(p.seed), num_parallel_calls=AUTOTUNE, deterministic=ctx.ordered)


def _batch(ds, step: Step, ctx: _Context):
    return batch(ds, ctx.p.batch_size, drop_remainder=step.drop_remainder,
                 bucket_boundaries=ctx.p.bucket_boundaries, bucket_key=ctx.p.bucket_key)


def _rebatch(ds, step: Step, ctx: _Context):
    return ds.rebatch(ctx.p.batch_size, drop_remainder=step.drop_remainder)


def _pick_step(ds, step: Step, ctx: _Context):
    return ds.map(_pick(ctx.request.feature_key))


def _features_only_step(ds, step: Step, ctx: _Context):
    return ds.map(_features_only)


def _distribute(ds, step: Step, ctx: _Context):
    # Options must be on the part the workers run: those set after distribute stay local.
    distribute = registry.distributor()
    if distribute is None:
        raise ValueError(f"data_service={ctx.p.data_service!r}: no tf.data service plug-in is installed")
    return distribute(ds.with_options(chain_options(ctx.request.mode, ctx.p)), ctx.p)


def _prefetch(ds, step: Step, ctx: _Context):
    return ds.prefetch(AUTOTUNE)


def _prefetch_to_device(ds, step: Step, ctx: _Context):
    if not tf.config.list_logical_devices("GPU"):
        return ds  # nothing to copy to
    return ds.apply(tf.data.experimental.prefetch_to_device("/gpu:0"))


_STEPS: dict[str, Callable[[tf.data.Dataset, Step, _Context], tf.data.Dataset]] = {
    "mix": _mix, "shard": _shard, "resume": _resume, "repeat": _repeat, "shuffle_files": _shuffle_files,
    "read_files": _read_files, "map": _map, "cache": _cache, "unblock": _unblock,
    "shuffle_examples": _shuffle_examples, "shuffle_blocks": _shuffle_blocks, "batch": _batch,
    "rebatch": _rebatch, "pick": _pick_step, "features_only": _features_only_step,
    "distribute": _distribute, "prefetch": _prefetch, "prefetch_to_device": _prefetch_to_device,
}


def chain_options(mode: str, p: PipelineConfig) -> tf.data.Options:
    """The tf.data options of a chain: order kept unless train allows otherwise, and static
    rewrites that follow the toggles."""
    options = tf.data.Options()
    options.deterministic = normalize_mode(mode) != TRAIN or p.deterministic
    # tf.data's default rewrites would quietly undo the toggles: parallelize the
    # "sequential" maps, fuse map+batch into a parallel op, and inject a prefetch.
    options.experimental_optimization.map_parallelization = p.parallel_map
    options.experimental_optimization.map_and_batch_fusion = p.parallel_map
    options.experimental_optimization.inject_prefetch = p.prefetch
    return options


def _features_only(features, labels=None):
    return features


def _pick(key: str) -> Callable[..., Any]:
    def pick(features, labels=None):
        if not isinstance(features, dict) or key not in features:
            have = sorted(features) if isinstance(features, dict) else type(features).__name__
            raise ValueError(f"feature_key={key!r}: the features are {have}")
        return features[key] if labels is None else (features[key], labels)

    return pick

