"""build_dataset: THE chain. Every source (a domain's files, your own files and functions,
shard folders) goes through it, and every optimization is one visible `if`.

Read top to bottom, the optimized chain is:
  files -> repeat -> shuffle filenames -> read (parallel, fused) -> batch -> batch stages -> prefetch
and PipelineConfig.naive() turns it into the seed question's chain:
  map(read) -> shuffle(whole set) -> map(process) -> batch -> repeat.
"""

from __future__ import annotations

import importlib
import re
from typing import Any, Callable, Optional, Sequence

import tensorflow as tf

from tfpipe.config import PipelineConfig
from tfpipe.core import resume as resume_lib
from tfpipe.core.source import ChainInput, find
from tfpipe.core.stage import Stage, fuse

AUTOTUNE = tf.data.AUTOTUNE
TRAIN, EVAL, PREDICT = "train", "eval", "predict"
_MODES = {TRAIN: TRAIN, EVAL: EVAL, PREDICT: PREDICT, "infer": PREDICT}


def normalize_mode(mode: str) -> str:
    """'train' | 'eval' | 'predict' from those names or tf.estimator.ModeKeys values."""
    if mode not in _MODES:
        raise ValueError(f"mode={mode!r}: allowed values are 'train', 'eval', 'predict' "
                         f"(or tf.estimator.ModeKeys.TRAIN/EVAL/PREDICT)")
    return _MODES[mode]


def build_dataset(data: Any, mode: str = TRAIN, pipeline: Optional[PipelineConfig] = None,
                  features: Any = None, input_context: Optional[tf.distribute.InputContext] = None, *,
                  read: Any = None, process: Any = None, batch_process: Any = None,
                  feature_key: Optional[str] = None, epochs: Optional[int] = None,
                  start_step: Optional[int] = None, allow_device_prefetch: bool = True) -> tf.data.Dataset:
    """Builds the input pipeline over any files and functions, every optimization behind its toggle.

    Args:
      data: a folder with one subfolder per class (the domain is found from the files:
        .wav audio, .jpg/.png images), a CSV manifest (path,label), a glob pattern, a shard
        folder (tfpipe.json), `(paths, labels)`, a list of paths (predict), or a Source.
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

    Returns:
      A dataset of `(features, labels)` batches; features is a dict (the domain's keys, or
      what your functions return), labels int64 [batch]. Elements whose shapes differ are
      padded to the batch's largest (padded_batch). In predict mode, features only.

    Raises:
      ValueError / tfpipe.DataError: unusable data or arguments, naming the file and the fix.
    """
    pipeline = pipeline or PipelineConfig.optimized()
    mode = normalize_mode(mode)
    if epochs is not None and (mode != TRAIN or epochs < 1):
        raise ValueError(f"epochs={epochs!r}: only for mode='train', and >= 1 (eval is always one pass)")
    if start_step is not None and (mode != TRAIN or start_step < 0 or epochs is not None or pipeline.cache):
        raise ValueError(f"start_step={start_step!r}: only for an endless mode='train' stream without cache, "
                         f"and >= 0")
    source = find(data)
    inputs = source.chain_input(mode, features, read=read, process=process, batch_process=batch_process)
    ds = chain(inputs, mode, pipeline, input_context, epochs=epochs, start_step=start_step)
    if feature_key is not None:
        ds = ds.map(_pick(feature_key, mode))
    return finish(ds, mode, pipeline, epochs=epochs, resumed=start_step is not None,
                  allow_device_prefetch=allow_device_prefetch)


def chain(inputs: ChainInput, mode: str, p: PipelineConfig,
          input_context: Optional[tf.distribute.InputContext] = None, *,
          epochs: Optional[int] = None, start_step: Optional[int] = None) -> tf.data.Dataset:
    """From a source's files to batches of (features, labels), before the shared tail."""
    train = mode == TRAIN
    ordered = not train or p.deterministic
    before, after = split_stages(inputs.stages, p.vectorize)
    if p.fuse_maps:
        before, after = [fuse(before)] if before else [], [fuse(after)] if after else []
    resume = train and start_step is not None
    # A cache must see one finite epoch in a fixed order, so repeat and the file shuffle follow it;
    # the resumable order repeats and permutes the files itself.
    repeat_first = train and p.repeat_before_shuffle and not p.cache and not resume
    shuffle_files = train and p.shuffle_filenames and not p.cache and not resume

    ds = shard_for_input_context(inputs.files, inputs.num_files, input_context)
    if resume:  # endless, each epoch permuted from (seed, epoch): starts anywhere at no cost
        ds = resume_lib.stream(ds, inputs, p.seed or 0, start_step * p.batch_size)
    if repeat_first:
        ds = ds.repeat(epochs)  # one stream over epochs: the shuffle below never drains and refills
    if shuffle_files:
        ds = ds.shuffle(inputs.num_files, seed=p.seed)  # paths are cheap to buffer; decoded data is not
    if inputs.expand is None:
        ds, before = apply_maps(ds, before[:1], p, ordered), before[1:]  # read (fused: and process)
    elif not resume:  # files of many records (shards); the resumable stream reads them itself
        ds = read_files(ds, inputs, p, ordered)
    if p.cache:
        ds = cache(ds, p.cache)
        if train and p.repeat_before_shuffle:
            ds = ds.repeat(epochs)
    if inputs.blocked and not resume:
        ds = ds.unbatch()  # blocks of examples -> examples, after the threads hand over whole blocks
    if train and not resume and (inputs.expand is not None or not shuffle_files):
        # Decoded examples (or records, which sit in a few shards at a time): a big buffer.
        ds = ds.shuffle(p.shuffle_buffer or inputs.num_examples, seed=p.seed)
    ds = apply_maps(ds, before, p, ordered)
    ds = batch(ds, p.batch_size, drop_remainder=train and p.drop_remainder)
    return apply_maps(ds, after, p, ordered)


def cache(ds: tf.data.Dataset, where: str) -> tf.data.Dataset:
    """Caches one epoch: in memory, in a file, or as a tf.data snapshot that outlives the process.

    A snapshot ("snapshot:DIR") is keyed by the fingerprint of the dataset graph before it
    (files, functions, features), so a cache of other data or features is never read,
    and only a finished first pass is ever read back.
    """
    if where.startswith("snapshot:"):
        return ds.snapshot(where.removeprefix("snapshot:"))
    return ds.cache("" if where == "memory" else where)


def split_stages(stages: Sequence[Stage], vectorize: bool) -> tuple[list[Stage], list[Stage]]:
    """(before batch, after batch): with vectorize, the trailing batchable stages run on batches."""
    stages = list(stages)
    if not vectorize:
        return stages, []
    cut = len(stages)
    while cut > 0 and stages[cut - 1].batchable:
        cut -= 1
    return stages[:cut], stages[cut:]


def read_files(ds: tf.data.Dataset, inputs: ChainInput, p: PipelineConfig, ordered: bool) -> tf.data.Dataset:
    """Each file's records: a parallel interleave over files, or one file after another."""
    if p.parallel_reads:
        cycle = min(p.cycle_length, inputs.num_files) if p.cycle_length else AUTOTUNE  # 0: the usable cores
        return ds.interleave(inputs.expand, cycle_length=cycle, block_length=inputs.block_length,
                             num_parallel_calls=AUTOTUNE, deterministic=ordered)
    return ds.flat_map(inputs.expand)


def apply_maps(ds: tf.data.Dataset, stages: Sequence[Any], p: PipelineConfig, ordered: bool) -> tf.data.Dataset:
    """ds.map(stage) for each stage, parallel when p.parallel_map, named after the stage."""
    for stage in stages:
        fn, name = (stage.fn, _op_name(stage.name)) if isinstance(stage, Stage) else (stage, None)
        if p.parallel_map:
            ds = ds.map(fn, num_parallel_calls=AUTOTUNE, deterministic=ordered, name=name)
        else:
            ds = ds.map(fn, name=name)
    return ds


def batch(ds: tf.data.Dataset, batch_size: int, drop_remainder: bool) -> tf.data.Dataset:
    """batch, or padded_batch when examples differ in shape (each batch padded to its largest)."""
    shapes = [s.shape for s in tf.nest.flatten(ds.element_spec)]
    if all(shape.is_fully_defined() for shape in shapes):
        return ds.batch(batch_size, drop_remainder=drop_remainder)
    return ds.padded_batch(batch_size, drop_remainder=drop_remainder)


def shard_for_input_context(ds: tf.data.Dataset, num_files: int,
                            input_context: Optional[tf.distribute.InputContext]) -> tf.data.Dataset:
    """Gives each input pipeline a disjoint subset of the files."""
    if input_context is None or input_context.num_input_pipelines <= 1:
        return ds
    n = input_context.num_input_pipelines
    if num_files < n:
        raise ValueError(f"{num_files} files but {n} input pipelines: each pipeline needs at least one; "
                         f"write at least {n} shards (tfpipe prepare --num_shards {n}) or use fewer workers")
    return ds.shard(n, input_context.input_pipeline_id)


def finish(ds: tf.data.Dataset, mode: str, p: PipelineConfig, *, epochs: Optional[int] = None,
           resumed: bool = False, allow_device_prefetch: bool = True) -> tf.data.Dataset:
    """The shared tail: repeat (naive order), data service, prefetch, options."""
    train = mode == TRAIN
    options = chain_options(mode, p)
    if train and not p.repeat_before_shuffle and not resumed:
        ds = ds.repeat(epochs)  # the seed's order: batch, then repeat
    if mode == PREDICT:
        ds = ds.map(_features_only)
    if p.data_service:
        # Loaded by name: the service module sits on top of the core. Options must be on the
        # part the workers run: those set after distribute stay local.
        ds = importlib.import_module("tfpipe.service").distribute(ds.with_options(options), p)
    if p.prefetch:
        ds = ds.prefetch(AUTOTUNE)  # the next batch is made while the model trains on this one
    if p.prefetch_to_device and allow_device_prefetch and tf.config.list_logical_devices("GPU"):
        ds = ds.apply(tf.data.experimental.prefetch_to_device("/gpu:0"))
    return ds.with_options(options)


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


def _pick(key: str, mode: str) -> Callable[..., Any]:
    def pick(features, labels=None):
        if not isinstance(features, dict) or key not in features:
            have = sorted(features) if isinstance(features, dict) else type(features).__name__
            raise ValueError(f"feature_key={key!r}: the features are {have}")
        return features[key] if labels is None else (features[key], labels)

    return pick


def _op_name(name: str) -> str:
    """A tf.data op name from a stage name ('read+decode' -> 'read_decode')."""
    return re.sub(r"[^A-Za-z0-9_.]", "_", name) or "map"
