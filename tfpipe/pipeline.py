"""build_dataset: the ordered tf.data chain, every optimization behind its toggle.

Read top to bottom, the optimized chain is:
  repeat -> shuffle filenames -> fused parallel map -> batch -> (vectorized map) -> prefetch
and PipelineConfig.naive() turns it into the seed question's chain:
  map(read) -> shuffle(whole set) -> map(post-process) -> batch -> repeat.
"""

from __future__ import annotations

import os
from typing import Callable, Optional, Sequence, Union

import tensorflow as tf

from tfpipe import audio, sources
from tfpipe.config import FeatureConfig, PipelineConfig

AUTOTUNE = tf.data.AUTOTUNE
TRAIN, EVAL, PREDICT = "train", "eval", "predict"
_MODES = {TRAIN: TRAIN, EVAL: EVAL, PREDICT: PREDICT, "infer": PREDICT}

Data = Union[str, os.PathLike, sources.Source]


def normalize_mode(mode: str) -> str:
    """'train' | 'eval' | 'predict' from those names or tf.estimator.ModeKeys values."""
    if mode not in _MODES:
        raise ValueError(f"mode={mode!r}: allowed values are 'train', 'eval', 'predict' "
                         f"(or tf.estimator.ModeKeys.TRAIN/EVAL/PREDICT)")
    return _MODES[mode]


def build_dataset(data: Data, mode: str = TRAIN, pipeline: Optional[PipelineConfig] = None,
                  features: Optional[FeatureConfig] = None,
                  input_context: Optional[tf.distribute.InputContext] = None, *,
                  allow_device_prefetch: bool = True) -> tf.data.Dataset:
    """Builds the input pipeline over a wav folder, CSV manifest or shard folder.

    Args:
      data: wav folder (one subfolder per class), CSV manifest (path,label), shard
        folder (tfpipe.json), or a `tfpipe.sources.Source`.
      mode: "train" (endless, shuffled), "eval" (one ordered pass, every example
        once, last partial batch kept) or "predict" (as eval, features only);
        tf.estimator.ModeKeys values work too.
      pipeline: which optimizations to apply; default PipelineConfig.optimized().
      features: which features to compute; default FeatureConfig(), or for a
        shard folder the FeatureConfig its index records.
      input_context: from tf.distribute / Estimator; each input pipeline then reads
        a disjoint subset of the files.
      allow_device_prefetch: False where the consumer needs host tensors
        (Estimator's input_fn); prefetch_to_device is then skipped.

    Returns:
      A dataset of `(features, labels)`: features = {"log_mel": float32 [batch,
      frames, n_mels]} (or {"waveform": float32 [batch, samples]}), labels = int64
      [batch]; in predict mode, features only.

    Raises:
      ValueError / tfpipe.DataError: unusable data, naming the file and the fix.
    """
    pipeline = pipeline or PipelineConfig.optimized()
    mode = normalize_mode(mode)
    source = sources.find_examples(data)
    if source.kind == "shards":
        from tfpipe import shards  # the shard reader lives with the shard writer
        features = features or FeatureConfig(**source.index["features"])  # as the shards were written
        ds = shards.shard_chain(source, mode, pipeline, features, input_context)
    else:
        ds = _wav_chain(source, mode, pipeline, features or FeatureConfig(), input_context)
    return _finish(ds, mode, pipeline, allow_device_prefetch)


def _wav_chain(source: sources.Source, mode: str, p: PipelineConfig, f: FeatureConfig,
               input_context: Optional[tf.distribute.InputContext]) -> tf.data.Dataset:
    """Wav files -> batches of (features, labels), before the shared tail."""
    train = mode == TRAIN
    ordered = not train or p.deterministic
    ds = wav_file_table(source, f)
    ds = shard_for_input_context(ds, len(source.paths), input_context)
    shuffle_files = train and p.shuffle_filenames and not p.cache

    if train and p.repeat_before_shuffle and not p.cache:
        ds = ds.repeat()  # one endless stream: the shuffle below never drains and refills
    if shuffle_files:
        ds = ds.shuffle(len(source.paths), seed=p.seed)  # paths are cheap to buffer; audio is not
    before, after = _wav_stages(p, f)
    ds = apply_maps(ds, before[:1], p, ordered)
    if p.cache:
        ds = ds.cache("" if p.cache == "memory" else p.cache)
        if train and p.repeat_before_shuffle:
            ds = ds.repeat()
    if train and not shuffle_files:
        ds = ds.shuffle(p.shuffle_buffer or len(source.paths), seed=p.seed)  # decoded examples
    ds = apply_maps(ds, before[1:], p, ordered)
    ds = ds.batch(p.batch_size, drop_remainder=train and p.drop_remainder)
    return apply_maps(ds, after, p, ordered)


def wav_file_table(source: sources.Source, f: FeatureConfig) -> tf.data.Dataset:
    """((path, data offset, data size), label) per wav file; bad files fail here, by name."""
    layout = sources.scan_wavs(source.paths, f)
    files = (list(source.paths), list(layout.offsets), list(layout.sizes))
    return tf.data.Dataset.from_tensor_slices((files, tf.constant(source.labels, tf.int64)))


def wav_stage_fns(f: FeatureConfig) -> tuple[Callable, Callable, Callable]:
    """The chain's per-stage map functions over wav_file_table elements: read, decode, featurize.

    Each works on one example or a batch; tfpipe.bench times them one by one.
    """

    def read(file, label):
        path, offset, size = file
        return (tf.io.read_file(path), offset, size), label

    def decode(file, label):
        contents, offset, size = file
        return audio.decode_pcm16(contents, offset, size, f.num_samples), label

    def featurize(waveform, label):
        return {f.feature_key: audio.compute_features(waveform, f)}, label

    return read, decode, featurize


def _wav_stages(p: PipelineConfig, f: FeatureConfig) -> tuple[list[Callable], list[Callable]]:
    """The map functions before and after batching, fused per side when fuse_maps is on."""
    read, decode, featurize = wav_stage_fns(f)
    if p.vectorize:  # per file only the read; decode and features run once per batch
        before, after = [read], [decode, featurize]
    else:  # the seed's two maps: read (+decode), then post-process
        before, after = [compose(read, decode), featurize], []
    if p.fuse_maps:
        before, after = [compose(*before)], [compose(*after)] if after else []
    return before, after


def compose(*fns: Callable) -> Callable:
    """One map function that runs `fns` in order."""

    def composed(*element):
        for fn in fns:
            element = fn(*element)
        return element

    return composed


def apply_maps(ds: tf.data.Dataset, fns: Sequence[Callable], p: PipelineConfig,
               ordered: bool) -> tf.data.Dataset:
    """ds.map(fn) for each fn, parallel when p.parallel_map."""
    for fn in fns:
        if p.parallel_map:
            ds = ds.map(fn, num_parallel_calls=AUTOTUNE, deterministic=ordered)
        else:
            ds = ds.map(fn)
    return ds


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


def _finish(ds: tf.data.Dataset, mode: str, p: PipelineConfig, allow_device_prefetch: bool) -> tf.data.Dataset:
    """The shared tail: repeat (naive order), data service, prefetch, options."""
    train = mode == TRAIN
    options = tf.data.Options()
    options.deterministic = not train or p.deterministic
    # tf.data's default rewrites would quietly undo the toggles: parallelize the
    # "sequential" maps, fuse map+batch into a parallel op, and inject a prefetch.
    options.experimental_optimization.map_parallelization = p.parallel_map
    options.experimental_optimization.map_and_batch_fusion = p.parallel_map
    options.experimental_optimization.inject_prefetch = p.prefetch
    if train and not p.repeat_before_shuffle:
        ds = ds.repeat()  # the seed's order: batch, then repeat
    if mode == PREDICT:
        ds = ds.map(lambda features, labels: features)
    if p.data_service:
        from tfpipe import service  # only users of the service pay for its import
        # Options must be on the part the workers run: those set after distribute stay local.
        ds = service.distribute(ds.with_options(options), p)
    if p.prefetch:
        ds = ds.prefetch(AUTOTUNE)  # the next batch is made while the model trains on this one
    if p.prefetch_to_device and allow_device_prefetch and tf.config.list_logical_devices("GPU"):
        ds = ds.apply(tf.data.experimental.prefetch_to_device("/gpu:0"))
    return ds.with_options(options)


def dataset_ops(ds: tf.data.Dataset) -> list[str]:
    """The chain's dataset ops from source to output, e.g. ['TensorSliceDataset', ..., 'PrefetchDataset'].

    Read from the dataset's graph, so it shows what tf.data will run, not what was asked.
    """
    graph = tf.compat.v1.GraphDef()
    graph.ParseFromString(ds._as_serialized_graph().numpy())  # pylint: disable=protected-access
    nodes = {n.name: n for n in graph.node}
    ops, name = [], _output_node(graph)
    while name in nodes:
        node = nodes[name]
        if "Dataset" in node.op:
            ops.append(node.op)
        dataset_inputs = [i.split(":")[0].lstrip("^") for i in node.input]
        name = next((i for i in dataset_inputs if "Dataset" in nodes.get(i, node).op), None)
    return ops[::-1]


def _output_node(graph: tf.compat.v1.GraphDef) -> str:
    for node in graph.node:
        if node.op == "_Retval":
            return node.input[0].split(":")[0]
    return graph.node[-1].name
