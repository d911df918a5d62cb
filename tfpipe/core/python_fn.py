"""python_fn: a plain-Python (numpy, librosa, PIL) function as a step of a tf.data chain.

tf.numpy_function runs it; what it adds is that a failure names the function and its input
(for a file, the path), a result of the wrong dtype or shape is caught before TensorFlow
sees it, and a call can have a deadline, so a hung function ends in an error instead of a
pipeline that never yields.
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any, Callable, Optional, Sequence

import numpy as np

from tfpipe.errors import DataError


def python_fn(fn: Callable[..., Any], output_signature: Any, *, name: str = "",
              timeout_s: Optional[float] = None) -> Callable[..., Any]:
    """Wraps a plain-Python (numpy, librosa, PIL) function so a tf.data map can call it.

    The function receives numpy values (bytes for strings) and must return values
    matching `output_signature` (a tf.TensorSpec or a nested structure of them, like
    `tf.data.Dataset.from_generator`'s). It runs under the GIL, so parallel maps gain
    little from it, and the tf.data service refuses it (the graph cannot carry Python).
    Prefer TensorFlow ops where they exist.

    Args:
      fn: the Python function.
      output_signature: tf.TensorSpec(s) of what fn returns; shapes may have None dims.
      name: op name shown by `tfpipe bench --ops` and in errors (default: fn's name).
      timeout_s: a call that has not returned after this many seconds fails, naming the
        function and its input (the hung call's thread is left behind); None: no deadline.

    Returns:
      A function of tensors returning tensors with the declared dtypes and shapes. When fn
      raises, returns a value that does not fit the signature, or misses its deadline, the
      pipeline fails with a message naming fn, its input and what was expected.
    """
    import tensorflow as tf  # here, not at the top: `import tfpipe` stays free of TensorFlow

    specs = tf.nest.flatten(output_signature)
    label = name or getattr(fn, "__name__", "python_fn")
    if not specs or not all(isinstance(s, tf.TensorSpec) for s in specs):
        raise ValueError(f"python_fn({label!r}): output_signature must be a tf.TensorSpec or a nested structure "
                         f"of them, got {output_signature!r}")
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(f"python_fn({label!r}, timeout_s={timeout_s!r}): must be a positive number of seconds")
    # An op name must start with a letter or digit: "_read_wav" -> "read_wav".
    op_name = re.sub(r"[^A-Za-z0-9_.]", "_", label).lstrip("_.") or "python_fn"

    def flat_fn(*args):
        result = _call(fn, args, label, timeout_s)
        values = tf.nest.flatten(result)
        if len(values) != len(specs):
            raise DataError(f"python_fn {label} returned {len(values)} values for input {describe(args)}; its "
                            f"output_signature declares {len(specs)}")
        return [_as_array(v, s, label, args) for v, s in zip(values, specs)]

    @functools.wraps(fn)
    def wrapped(*args):
        flat = tf.numpy_function(flat_fn, list(args), [s.dtype for s in specs], stateful=False, name=op_name)
        flat = [tf.ensure_shape(t, s.shape) for t, s in zip(flat, specs)]
        return tf.nest.pack_sequence_as(output_signature, flat)

    wrapped.tfpipe_python = True
    return wrapped


def _call(fn: Callable[..., Any], args: Sequence[Any], label: str, timeout_s: Optional[float]) -> Any:
    """fn(*args); its exception, or a missed deadline, as a DataError naming fn and the input."""
    if timeout_s is None:
        try:
            return fn(*args)
        except Exception as e:
            raise DataError(f"python_fn {label} failed on input {describe(args)}: {type(e).__name__}: {e}") from e
    box: dict = {}

    def run():
        try:
            box["result"] = fn(*args)
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e

    worker = threading.Thread(target=run, name=f"tfpipe-{label}", daemon=True)  # daemon: a hung call cannot block exit
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise DataError(f"python_fn {label} did not return within timeout_s={timeout_s:g} s on input "
                        f"{describe(args)}; it is stuck (a lock, a network call, an endless loop) — fix it, or "
                        f"raise timeout_s if it is only slow")
    if "error" in box:
        e = box["error"]
        raise DataError(f"python_fn {label} failed on input {describe(args)}: {type(e).__name__}: {e}") from e
    return box["result"]


def _as_array(value: Any, spec: Any, label: str, args: Sequence[Any]) -> np.ndarray:
    """`value` as a numpy array of the declared dtype, or a DataError naming what does not fit."""
    if spec.dtype.name == "string":
        array = np.asarray(value, dtype=object)
    else:
        array = np.asarray(value)
        want = np.dtype(spec.dtype.as_numpy_dtype)
        if array.dtype != want and not np.can_cast(array.dtype, want, casting="same_kind"):
            raise DataError(f"python_fn {label} returned {array.dtype}{list(array.shape)} for input {describe(args)}; "
                            f"its output_signature says {want.name} (convert the value, or declare its dtype)")
        array = array.astype(want, copy=False)
    if not spec.shape.is_compatible_with(array.shape):
        raise DataError(f"python_fn {label} returned shape {list(array.shape)} for input {describe(args)}; its "
                        f"output_signature says {spec.shape} (None marks a dimension that may vary)")
    return array


def describe(args: Sequence[Any]) -> str:
    """The inputs of a call as a person reads them: paths as text, arrays as dtype[shape]."""
    parts = []
    for a in args:
        if isinstance(a, (bytes, np.bytes_)):
            text = bytes(a).decode("utf-8", "replace")
            parts.append(repr(text if len(text) <= 200 else text[:200] + "..."))
        elif isinstance(a, np.ndarray) and a.size > 1:
            parts.append(f"{a.dtype}{list(a.shape)}")
        else:
            parts.append(repr(a.item() if hasattr(a, "item") else a))
    return "(" + ", ".join(parts) + ")"
