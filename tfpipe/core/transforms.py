"""The dataset transformations the chain's steps are made of: a stage as a map (or a map that
skips failing examples), batching (padded, by length bucket), a window permutation of blocks,
and each input pipeline's share of the files."""

from __future__ import annotations

import re
import sys
from typing import Any, Callable, Optional, Sequence

import tensorflow as tf

from tfpipe.core.stage import Stage

AUTOTUNE = tf.data.AUTOTUNE


def apply_stage(ds: tf.data.Dataset, stage: Stage, parallel: bool, ordered: bool) -> tf.data.Dataset:
    """ds.map(stage.fn), parallel or sequential, named after the stage (bench --ops shows the name)."""
    try:
        if parallel:
            return ds.map(stage.fn, num_parallel_calls=AUTOTUNE, deterministic=ordered, name=_op_name(stage.name))
        return ds.map(stage.fn, name=_op_name(stage.name))
    except RuntimeError as e:
        if "EagerTensor" not in str(e):
            raise
        raise ValueError(f"{stage.name} ({getattr(stage.fn, '__name__', 'fn')}): the function uses a tensor made "
                         f"outside it ({str(e).splitlines()[0][:160]}). It works eagerly, but an Estimator calls "
                         f"input_fn in a graph of its own where that tensor does not exist: make the tensor "
                         f"inside the function (tf.constant(...) in its body) or capture a numpy array "
                         f"instead") from None


def skip_failures(ds: tf.data.Dataset, stage: Stage, ordered: bool) -> tf.data.Dataset:
    """ds.map(stage.fn), where an element that fails is left out and named on stderr with a running count.

    Each element is mapped inside a one-element dataset whose error is ignored, followed by a
    marker that stands in for it when it failed; the marker carries the file's path (the
    element's first string), which a sequential scan prints and counts before it is filtered.
    """
    def one(*element):
        path = next((t for t in tf.nest.flatten(element) if t.dtype == tf.string and t.shape.rank == 0),
                    tf.constant("(an element without a path)"))
        done = tf.data.Dataset.from_tensors(element).map(stage.fn).ignore_errors(log_warning=True)
        blank = tf.nest.map_structure(lambda s: tf.zeros([d or 0 for d in s.shape], s.dtype), done.element_spec)
        failed = tf.data.Dataset.from_tensors((False, path, blank))
        def mark(*out):
            return True, path, out if len(out) > 1 else out[0]

        return done.map(mark).concatenate(failed).take(1)

    def count(skipped, marked):
        ok, path, out = marked
        skipped += tf.cast(tf.logical_not(ok), tf.int64)
        if not ok:
            tf.print("tfpipe: skipped", path, "(on_error='skip'):", stage.name, "failed on it; TensorFlow's",
                     "message is the warning above; skipped so far:", skipped, output_stream=sys.stderr)
        return skipped, (ok, out)

    def kept(ok, out):
        return ok

    def value(ok, out):
        return out

    ds = ds.interleave(one, cycle_length=AUTOTUNE, num_parallel_calls=AUTOTUNE, deterministic=ordered)
    ds = ds.scan(tf.constant(0, tf.int64), count)
    return ds.filter(kept).map(value)


def batch(ds: tf.data.Dataset, batch_size: int, drop_remainder: bool,
          bucket_boundaries: Sequence[int] = (), bucket_key: str = "") -> tf.data.Dataset:
    """batch; or, when examples differ in shape, padded_batch (each batch padded to its longest),
    or with bucket_boundaries one padded batch per length bucket (padded only within it)."""
    # Sparse and ragged values (VarLenFeature, RaggedFeature) batch as they are; dense ones of
    # differing shapes need padding.
    dense = [s for s in tf.nest.flatten(ds.element_spec) if isinstance(s, tf.TensorSpec)]
    if all(s.shape.is_fully_defined() for s in dense):
        return ds.batch(batch_size, drop_remainder=drop_remainder)
    if not bucket_boundaries:
        return ds.padded_batch(batch_size, drop_remainder=drop_remainder)
    length = _length_fn(ds.element_spec, bucket_key)
    return ds.bucket_by_sequence_length(length, list(bucket_boundaries), [batch_size] * (len(bucket_boundaries) + 1),
                                        drop_remainder=drop_remainder)


def _length_fn(spec: Any, key: str) -> Callable[..., tf.Tensor]:
    """Length of an example: the leading dimension of `key`, or of its one variable-length feature."""
    features = spec[0] if isinstance(spec, tuple) else spec
    if not isinstance(features, dict):
        raise ValueError("bucket_boundaries: examples must be (features dict, label) to find their length")
    variable = [k for k, s in features.items() if s.shape.rank and s.shape[0] is None]
    if key and key not in features:
        raise ValueError(f"bucket_key={key!r}: the features are {sorted(features)}")
    if not key and len(variable) != 1:
        raise ValueError(f"bucket_boundaries: {len(variable)} features vary in length ({', '.join(variable) or 'none'}); "
                         f"name the one that sets an example's length with bucket_key")
    key = key or variable[0]

    def length(features, labels=None):
        return tf.shape(features[key], out_type=tf.int32)[0]

    return length


def permute_window(seed: Optional[int]) -> Callable[..., Any]:
    """One random permutation applied to every tensor of a window of examples (one gather each)."""

    def permute(*window):
        size = tf.shape(tf.nest.flatten(window)[0])[0]
        order = tf.random.shuffle(tf.range(size), seed=seed)
        return tf.nest.map_structure(lambda t: tf.gather(t, order), window if len(window) > 1 else window[0])

    return permute


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


def _op_name(name: str) -> str:
    """A tf.data op name from a stage name ('read+decode' -> 'read_decode')."""
    return re.sub(r"[^A-Za-z0-9_.]", "_", name) or "map"
