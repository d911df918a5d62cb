"""What a variant's batches hold: their dtypes and shapes, their size, and how much of them is padding.

Run in the worker on the batches it builds and warms up with; numbers only, no timing.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np


def num_examples(batch: Any) -> int:
    """Batch size of a (features, labels) batch (the leading dimension of its last tensor)."""
    import tensorflow as tf

    return int(tf.nest.flatten(batch)[-1].shape[0])


def describe(batch: Any) -> str:
    """What a batch holds, e.g. "({'image': uint8[64, 96, 96, 3]}, int64[64])": dtypes and shapes, no values."""
    import tensorflow as tf

    if isinstance(batch, dict):
        return "{" + ", ".join(f"{k!r}: {describe(v)}" for k, v in batch.items()) + "}"
    if isinstance(batch, (tuple, list)):
        return "(" + ", ".join(describe(v) for v in batch) + ")"
    if hasattr(batch, "dtype") and hasattr(batch, "shape"):
        return f"{tf.as_dtype(batch.dtype).name}{list(batch.shape)}"
    return type(batch).__name__


def padding_share(batches: Sequence[Any], element_spec: Any) -> Optional[float]:
    """Share of the values of `batches` that are padding, where examples vary in shape.

    The tensors whose spec leaves a non-batch dimension unknown are the padded ones
    (padded_batch pads each to the batch's longest, with zeros at the end of every such
    dimension). An example's real extent along one of them is up to its last non-zero
    value, so trailing zeros of the example itself count as padding too.

    Args:
      batches: batches as the dataset yields them (tensors or arrays).
      element_spec: the dataset's element_spec (which dimensions vary).

    Returns:
      The share (0 to 1) over the varying numeric tensors, or None where no shape varies.
    """
    import tensorflow as tf

    specs = tf.nest.flatten(element_spec)
    varying = [i for i, s in enumerate(specs) if getattr(s, "shape", None) is not None and s.shape.rank
               and s.dtype.is_numpy_compatible and s.dtype != tf.string and None in s.shape[1:]]
    if not varying:
        return None
    padded = total = 0
    for batch in batches:
        flat = tf.nest.flatten(batch)
        for i in varying:
            values = np.asarray(flat[i])
            axes = [a for a in range(1, values.ndim) if specs[i].shape[a] is None]
            real = _real_values(values != 0, axes)
            total += values.size
            padded += values.size - real
    return padded / total if total else None


def _real_values(nonzero: np.ndarray, axes: Sequence[int]) -> int:
    """Values inside each example's extent: up to its last non-zero along every varying axis."""
    extent = np.ones(nonzero.shape[0], np.int64)
    for axis in axes:
        others = tuple(a for a in range(1, nonzero.ndim) if a != axis)
        along = nonzero.any(axis=others) if others else nonzero  # [batch, length]
        last = along.shape[1] - np.argmax(along[:, ::-1], axis=1)  # one past the last non-zero
        extent *= np.where(along.any(axis=1), last, 0)
    fixed = int(np.prod([nonzero.shape[a] for a in range(1, nonzero.ndim) if a not in axes]))
    return int(extent.sum()) * fixed
