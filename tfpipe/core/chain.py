"""build_dataset: THE chain. Every source (a domain's files, your own files and functions,
shard folders, TFRecords, mixtures) goes through it.

The order of the steps is decided by the pure plan (`tfpipe.core.plan`); this module applies
it, one small function per step, in chain order:

  reuse memory -> mix | shard -> order | repeat -> shuffle files -> read files -> maps -> cache
  -> unblock -> shuffle examples | shuffle blocks -> repeat (after a cache) -> maps -> batch | rebatch
  -> batch maps -> repeat (naive) -> pick -> features only -> distribute -> prefetch
  -> prefetch to device -> options
"""

from __future__ import annotations

import dataclasses
import functools
import random
from typing import Any, Callable, Optional, Sequence

import tensorflow as tf

from tfpipe.config import PipelineConfig
from tfpipe.core import cache as cache_lib
from tfpipe.core import memory
from tfpipe.core import registry
from tfpipe.core import resume as resume_lib
from tfpipe.core.mixture import mix_datasets
from tfpipe.core.plan import EVAL, PREDICT, TRAIN, Request, Yields, options_step, plan, split_stages  # noqa: F401
from tfpipe.core.steps import (Batch, Cache, Distribute, FeaturesOnly, Group, Map, Mix, Options, Order, Pick, Prefetch,
                               PrefetchToDevice, ReadFiles, Rebatch, Repeat, ReuseMemory, Shard, ShuffleBlocks,
                               ShuffleExamples, ShuffleFiles, Step, Unblock)
from tfpipe.core.chain_input import ChainInput
from tfpipe.core.source import find
from tfpipe.core.stage import fuse, grouped
from tfpipe.core.transforms import apply_stage, batch, permute_window, skip_failures
from tfpipe.errors import DataError

AUTOTUNE = tf.data.AUTOTUNE
_MODES = {TRAIN: TRAIN, EVAL: EVAL, PREDICT: PREDICT, "infer": PREDICT}



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
                  on_error: str = "raise", class_names: Optional[Sequence[str]] = None) -> tf.data.Dataset:
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
      class_names: number the classes by these names (Keras' name), e.g. the training
        source's `class_names` for eval data that lacks a class; a class the data has and
        the list lacks is refused, naming it (tfpipe.find).

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
                 allow_device_prefetch=allow_device_prefetch, on_error=on_error, class_names=class_names)


def build(data: Any, mode: str, pipeline: PipelineConfig, features: Any = None,
          input_context: Optional[tf.distribute.InputContext] = None, **keywords: Any) -> tf.data.Dataset:
    """build_dataset with checked arguments, the resume position in examples and the seed the
    position was counted in (make_input_fn's ledger); the keywords are `planned`'s."""
    return apply(*planned(data, mode, pipeline, features, input_context, **keywords))


def planned(data: Any, mode: str, pipeline: PipelineConfig, features: Any = None,
            input_context: Optional[tf.distribute.InputContext] = None, *, read: Any = None, process: Any = None,
            batch_process: Any = None, feature_key: Optional[str] = None, epochs: Optional[int] = None,
            start_example: Optional[int] = None, seed: Optional[int] = None, allow_device_prefetch: bool = True,
            on_error: str = "raise", class_names: Optional[Sequence[str]] = None
            ) -> tuple[tuple[Step, ...], ChainInput]:
    """(the plan, the source's ChainInput) that `build` applies: the files listed and checked, no
    dataset built (`tfpipe.describe` shows the plan)."""
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error={on_error!r}: allowed values are 'raise' and 'skip'")
    inputs = find(data, class_names).chain_input(mode, features, read=read, process=process, batch_process=batch_process)
    pipelines, index = ((input_context.num_input_pipelines, input_context.input_pipeline_id)
                        if input_context is not None else (1, 0))
    request = Request(mode, epochs, start_example, _seed(pipeline, seed), pipelines, index, feature_key,
                      allow_device_prefetch, on_error)
    steps = plan(pipeline, shared_yields(inputs.yields, pipelines), request)
    check_not_empty(inputs, pipeline, request, steps)
    return steps, inputs


def _seed(pipeline: PipelineConfig, seed: Optional[int]) -> int:
    """The seed of this build's orders: given, the pipeline's, or a fresh one (a new order each run)."""
    if seed is not None:
        return seed
    if pipeline.seed is not None:
        return pipeline.seed
    return random.SystemRandom().randrange(1 << 62)


def shared_yields(yields: Yields, pipelines: int) -> Yields:
    """What one of `pipelines` input pipelines gets: about its share of the files and examples."""
    if pipelines <= 1:
        return yields
    return dataclasses.replace(yields, num_files=-(-yields.num_files // pipelines),
                               num_examples=-(-yields.num_examples // pipelines))


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


def apply(steps: Sequence[Step], inputs: ChainInput) -> tf.data.Dataset:
    """Runs the plan's steps, each with the arguments it carries, over the source's file table."""
    ds = inputs.files
    for step in steps:
        ds = apply_step(step, ds, inputs)
    return ds


def check_not_empty(inputs: ChainInput, p: PipelineConfig, request: Request, steps: Sequence[Step]) -> None:
    """DataError / ValueError when a train stream would never yield a batch (an endless stream that
    spins, or an Estimator that trains 0 steps), naming the data and the fix."""
    if request.mode != TRAIN:
        return
    for inp in [inputs] + [m for m, _ in inputs.members]:
        if inp.num_examples == 0:
            raise DataError(f"{_where(inp)}: {inp.num_files} files hold 0 examples (records): a train stream "
                            f"over them would never yield a batch; check the files (tfpipe inspect) or leave "
                            f"them out")
    if not p.drop_remainder:
        return
    before_batch = steps[:next(i for i, s in enumerate(steps) if isinstance(s, (Batch, Rebatch)))]
    if any(isinstance(s, Order) or (isinstance(s, Repeat) and s.count is None) for s in before_batch):
        return  # endless before batching: batches span epochs
    passes = next((s.count for s in before_batch if isinstance(s, Repeat)), 1)
    share = inputs.num_examples // request.pipelines
    if share * passes < p.batch_size:
        raise ValueError(f"{inputs.num_examples} examples ({share} per input pipeline, {passes} pass(es) before "
                         f"batching) but batch_size={p.batch_size} with drop_remainder: every example would be "
                         f"dropped and the train stream would be empty; lower batch_size, set "
                         f"drop_remainder=False, or set repeat_before_shuffle=True (repeat before batching)")


def _where(inputs: ChainInput) -> str:
    paths = inputs.paths
    return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "") if paths else "the data"


def chain_options(mode: str, p: PipelineConfig) -> tf.data.Options:
    """The tf.data options of a chain in `mode` (the plan's Options step, as tf.data.Options)."""
    return _options(options_step(p, normalize_mode(mode)))


# --- the steps, in chain order: each applies what its Step carries ---------------------------

@functools.singledispatch
def apply_step(step: Step, ds: tf.data.Dataset, inputs: ChainInput) -> tf.data.Dataset:
    raise TypeError(f"no rule applies the step {step!r}")


@apply_step.register
def _(step: ReuseMemory, ds, inputs):
    memory.reuse_large_buffers()  # a process setting: the dataset is unchanged
    return ds


@apply_step.register
def _(step: Mix, ds, inputs):
    """Each member's own plan up to examples, then drawn by weight (eval: member after member)."""
    datasets = [apply(member_steps, member) for member_steps, (member, _) in zip(step.members, inputs.members)]
    return mix_datasets(datasets, step.weights, train=step.train, seed=step.seed)


@apply_step.register
def _(step: Shard, ds, inputs):
    if inputs.num_files < step.pipelines:
        raise ValueError(f"{inputs.num_files} files but {step.pipelines} input pipelines: each pipeline needs at "
                         f"least one; write at least {step.pipelines} shards (tfpipe prepare --num_shards "
                         f"{step.pipelines}) or use fewer workers")
    return ds.shard(step.pipelines, step.index)


@apply_step.register
def _(step: Order, ds, inputs):
    return resume_lib.stream(ds, inputs, step)


@apply_step.register
def _(step: Repeat, ds, inputs):
    return ds.repeat(step.count)


@apply_step.register
def _(step: ShuffleFiles, ds, inputs):
    return ds.shuffle(step.buffer, seed=step.seed)


@apply_step.register
def _(step: ReadFiles, ds, inputs):
    if not step.parallel:
        return ds.flat_map(inputs.expand)
    cycle = min(step.cycle_length, inputs.num_files) if step.cycle_length else AUTOTUNE  # 0: the usable cores
    return ds.interleave(inputs.expand, cycle_length=cycle, block_length=step.block_length,
                         num_parallel_calls=AUTOTUNE, deterministic=step.deterministic)


@apply_step.register
def _(step: Group, ds, inputs):
    # The order's stream is endless: dropping a last partial group drops nothing.
    return ds.rebatch(step.size, drop_remainder=True) if step.windows else ds.batch(step.size, drop_remainder=True)


@apply_step.register
def _(step: Map, ds, inputs):
    stage = grouped(fuse(step.stages), step.group) if step.group else fuse(step.stages)
    if step.skip_errors:
        return skip_failures(ds, stage, step.deterministic)
    return apply_stage(ds, stage, step.parallel, step.deterministic)


@apply_step.register
def _(step: Cache, ds, inputs):
    return cache_lib.cache(ds, step.where, inputs)


@apply_step.register
def _(step: Unblock, ds, inputs):
    return ds.unbatch()


@apply_step.register
def _(step: ShuffleExamples, ds, inputs):
    return ds.shuffle(step.buffer, seed=step.seed)


@apply_step.register
def _(step: ShuffleBlocks, ds, inputs):
    """Blocks shuffled whole, then re-cut into windows whose examples are permuted in one op each."""
    ds = ds.shuffle(step.buffer, seed=step.seed).rebatch(step.window)
    return ds.map(permute_window(step.seed), num_parallel_calls=AUTOTUNE, deterministic=step.deterministic)


@apply_step.register
def _(step: Batch, ds, inputs):
    return batch(ds, step.size, drop_remainder=step.drop_remainder, bucket_boundaries=step.buckets,
                 bucket_key=step.bucket_key)


@apply_step.register
def _(step: Rebatch, ds, inputs):
    return ds.rebatch(step.size, drop_remainder=step.drop_remainder)


@apply_step.register
def _(step: Pick, ds, inputs):
    return ds.map(_pick(step.key))


@apply_step.register
def _(step: FeaturesOnly, ds, inputs):
    return ds.map(_features_only)


@apply_step.register
def _(step: Options, ds, inputs):
    return ds.with_options(_options(step))


@apply_step.register
def _(step: Distribute, ds, inputs):
    distribute = registry.distributor()
    if distribute is None:
        raise ValueError(f"data_service={step.data_service!r}: no tf.data service plug-in is installed")
    return distribute(ds, step)


@apply_step.register
def _(step: Prefetch, ds, inputs):
    return ds.prefetch(AUTOTUNE)


@apply_step.register
def _(step: PrefetchToDevice, ds, inputs):
    if not tf.config.list_logical_devices("GPU"):
        return ds  # nothing to copy to
    return ds.apply(tf.data.experimental.prefetch_to_device(step.device))


def _options(step: Options) -> tf.data.Options:
    options = tf.data.Options()
    options.deterministic = step.deterministic
    options.experimental_optimization.map_parallelization = step.map_parallelization
    options.experimental_optimization.map_and_batch_fusion = step.map_and_batch_fusion
    options.experimental_optimization.inject_prefetch = step.inject_prefetch
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

