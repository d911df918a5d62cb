"""python_fn: a plain-Python (numpy, librosa, PIL) function as a step of a tf.data chain.

tf.numpy_function runs it; what it adds is that a failure names the function and its input
(for a file, the path), a result of the wrong dtype or shape is caught before TensorFlow
sees it, a call can have a deadline, so a hung function ends in an error instead of a
pipeline that never yields, and without one a call still running after a minute is named on
stderr once a minute. The op's name carries a key of the function's code, so a snapshot cache
(which keys on the graph) is not served after the function changed.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
import threading
import time
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
        function and its input (the hung call's thread is left behind); None: no deadline,
        but a call running over a minute is named on stderr once a minute.

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
    # An op name must start with a letter or digit: "_read_wav" -> "read_wav". The code's key in the
    # name puts it in the graph, so a snapshot of this chain is keyed on the function's code too.
    op_name = f"{re.sub(r'[^A-Za-z0-9_.]', '_', label).lstrip('_.') or 'python_fn'}_{code_key(fn)}"

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
        token = _RUNNING.enter(label, args)
        try:
            return fn(*args)
        except Exception as e:
            raise DataError(f"python_fn {label} failed on input {describe(args)}: {type(e).__name__}: {e}") from e
        finally:
            _RUNNING.leave(token)
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


def code_key(fn: Callable[..., Any]) -> str:
    """8 hex digits that change when fn's code, constants, defaults or closed-over values change.

    Module globals fn reads are not covered (documented on python_fn's snapshot note).
    """
    digest = hashlib.sha256()

    def add_code(code) -> None:
        digest.update(code.co_code)
        digest.update(repr(code.co_names).encode())
        for const in code.co_consts:
            add_code(const) if hasattr(const, "co_code") else digest.update(repr(const).encode())

    def add_fn(f, depth: int) -> None:
        target = getattr(f, "__wrapped__", f)
        code = getattr(target, "__code__", None) or getattr(getattr(target, "__call__", None), "__code__", None)
        if code is None:
            digest.update(repr(target).encode())
            return
        add_code(code)
        digest.update(repr(getattr(target, "__defaults__", None)).encode())
        for cell in getattr(target, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if callable(value) and depth < 4:
                add_fn(value, depth + 1)  # a wrapper's wrapped function, a factory's parameters
            else:
                digest.update(repr(value).encode())

    add_fn(fn, 0)
    return digest.hexdigest()[:8]


class _Running:
    """python_fn calls in flight (without a deadline): one thread names those running over a minute."""

    NOTE_AFTER_S = 60.0

    def __init__(self):
        self._lock, self._calls, self._next, self._thread = threading.Lock(), {}, 0, None

    def enter(self, label: str, args: Sequence[Any]) -> int:
        with self._lock:
            self._next += 1
            self._calls[self._next] = (time.monotonic(), label, args)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="tfpipe-python_fn-watch", daemon=True)
                self._thread.start()
            return self._next

    def leave(self, token: int) -> None:
        with self._lock:
            self._calls.pop(token, None)

    def _watch(self) -> None:
        noted: dict[int, float] = {}
        while True:
            time.sleep(min(1.0, self.NOTE_AFTER_S / 6))
            now = time.monotonic()
            with self._lock:
                calls = dict(self._calls)
            for token, (start, label, args) in calls.items():
                if now - start >= self.NOTE_AFTER_S and now - noted.get(token, 0) >= self.NOTE_AFTER_S:
                    noted[token] = now
                    print(f"tfpipe: python_fn {label} has been running {now - start:.0f} s on input {describe(args)} "
                          f"(stuck? Ctrl-C stops; python_fn(..., timeout_s=...) turns it into an error)",
                          file=sys.stderr, flush=True)
            noted = {t: n for t, n in noted.items() if t in calls}


_RUNNING = _Running()


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
