"""Stage: one named map step of a chain; compose() fuses steps; python_fn() wraps numpy code.

A chain is a list of stages. Which of them run before or after `batch`, fused or not,
parallel or not, is the chain's decision (tfpipe.core.chain), taken from the toggles;
a stage only says what it computes and whether it also works on a whole batch.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, Callable, Sequence


@dataclasses.dataclass(frozen=True)
class Stage:
    """One map step.

    Attributes:
      name: shown in `dataset_ops`-style listings and as the tf.data op's name.
      fn: `fn(*element) -> element`; an element is a tuple, usually (features, label).
      batchable: fn gives the same result on a batch as on each example of it, so with
        `vectorize` it can run once per batch after `batch` (decode, parse, spectrogram).
      python: fn runs Python under the GIL (python_fn / numpy_function); it cannot run
        on the tf.data service and does not scale with threads.
      random: fn draws random numbers (a random crop, a flip): a cache must sit before it,
        or every epoch would repeat the first epoch's draws.
    """

    name: str
    fn: Callable[..., Any]
    batchable: bool = False
    python: bool = False
    random: bool = False


def compose(*fns: Callable[..., Any]) -> Callable[..., Any]:
    """One map function that runs `fns` in order (each gets the previous one's output, unpacked)."""

    def composed(*element):
        for fn in fns:
            element = fn(*element)
            if not isinstance(element, tuple):
                element = (element,)
        return element[0] if len(element) == 1 else element

    return composed


def fuse(stages: Sequence[Stage]) -> Stage:
    """The stages as one Stage (names joined with '+'), batchable only if all are."""
    if len(stages) == 1:
        return stages[0]
    return Stage("+".join(s.name for s in stages), compose(*(s.fn for s in stages)),
                 batchable=all(s.batchable for s in stages), python=any(s.python for s in stages),
                 random=any(s.random for s in stages))


def as_stage(fn: Any, name: str, batchable: bool = False, random: bool = False) -> Stage:
    """A user's function (plain callable, python_fn result or Stage) as a Stage."""
    if isinstance(fn, Stage):
        return fn
    if not callable(fn):
        raise ValueError(f"{name}={fn!r}: expected a function (or tfpipe.python_fn(fn, output_signature))")
    return Stage(name, fn, batchable=batchable, python=bool(getattr(fn, "tfpipe_python", False)), random=random)


def user_stages(read: Any = None, process: Any = None, batch_process: Any = None) -> list[Stage]:
    """A user's functions as stages: read and process per example, batch_process batchable.

    `read` is taken to be deterministic (the same bytes for the same file) and the others
    possibly random (augmentation), so a cache keeps what `read` returns and runs the rest
    each epoch; pass a `Stage(..., random=False)` to let a cache keep its output too.
    """
    return [as_stage(fn, name, batchable, random=name != "read") for fn, name, batchable in
            ((read, "read", False), (process, "process", False), (batch_process, "batch_process", True))
            if fn is not None]


def python_fn(fn: Callable[..., Any], output_signature: Any, *, name: str = "") -> Callable[..., Any]:
    """Wraps a plain-Python (numpy, librosa, PIL) function so a tf.data map can call it.

    The function receives numpy values (bytes for strings) and must return values
    matching `output_signature` (a tf.TensorSpec or a nested structure of them, like
    `tf.data.Dataset.from_generator`'s). It runs under the GIL, so parallel maps gain
    little from it, and the tf.data service refuses it (the graph cannot carry Python).
    Prefer TensorFlow ops where they exist.

    Args:
      fn: the Python function.
      output_signature: tf.TensorSpec(s) of what fn returns; shapes may have None dims.
      name: op name shown by `tfpipe bench --ops` (default: fn's name).

    Returns:
      A function of tensors returning tensors with the declared dtypes and shapes.
    """
    import tensorflow as tf  # here, not at the top: the pure chain plan reads Stage without TensorFlow

    specs = tf.nest.flatten(output_signature)
    if not specs or not all(isinstance(s, tf.TensorSpec) for s in specs):
        raise ValueError(f"python_fn({getattr(fn, '__name__', fn)!r}): output_signature must be a "
                         f"tf.TensorSpec or a nested structure of them, got {output_signature!r}")

    # An op name must start with a letter or digit: "_read_wav" -> "read_wav".
    op_name = re.sub(r"[^A-Za-z0-9_.]", "_", name or getattr(fn, "__name__", "python_fn")).lstrip("_.") or "python_fn"

    def flat_fn(*args):
        return [_as_array(v, s) for v, s in zip(tf.nest.flatten(fn(*args)), specs, strict=True)]

    @functools.wraps(fn)
    def wrapped(*args):
        flat = tf.numpy_function(flat_fn, list(args), [s.dtype for s in specs], stateful=False,
                                 name=op_name)
        flat = [tf.ensure_shape(t, s.shape) for t, s in zip(flat, specs)]
        return tf.nest.pack_sequence_as(output_signature, flat)

    wrapped.tfpipe_python = True
    return wrapped


def _as_array(value: Any, spec: Any) -> Any:
    """numpy value of the declared dtype, so numpy_function's dtype check passes."""
    import numpy as np

    if spec.dtype.name == "string":
        return np.asarray(value, dtype=object)
    return np.asarray(value, dtype=spec.dtype.as_numpy_dtype)
