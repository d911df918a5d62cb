"""A user's own pipeline functions: "MODULE:FUNCTION" / "FILE.py:FUNCTION" specs, loaded and called.

Each bench variant runs in a process of its own, so a user's function travels there as
its spec string and is imported again on the other side.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from typing import Any, Callable, Union

# What an Estimator passes to an input_fn that names the argument (estimator.py, _call_input_fn).
_INPUT_FN_ARGS = ("mode", "params", "config", "input_context")


def fn_spec(fn: Union[str, Callable]) -> str:
    """"MODULE:QUALNAME" of a module-level function (a file path for one defined in __main__).

    Args:
      fn: a spec string (returned as is, stripped) or a function defined at module level.

    Raises:
      ValueError: a lambda, a nested function or anything else another process cannot import.
    """
    if isinstance(fn, str):
        spec = fn.strip()
        if not spec.partition(":")[0] or not spec.partition(":")[2]:
            raise ValueError(f"{fn!r}: expected MODULE:FUNCTION or FILE.py:FUNCTION")
        return spec
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not callable(fn) or not module or "<" in qualname:
        raise ValueError(f"{fn!r}: bench runs each variant in its own process, which imports the function by "
                         f"name; pass a function defined at module level (not a lambda or nested function), "
                         f"or its 'MODULE:FUNCTION' / 'FILE.py:FUNCTION' spec")
    if module == "__main__":
        path = getattr(sys.modules["__main__"], "__file__", None)
        if not path:
            raise ValueError(f"{qualname}: defined in an interactive session; put it in a .py file and pass "
                             f"'FILE.py:{qualname}'")
        module = os.path.abspath(path)
    return f"{module}:{qualname}"


def load_fn(spec: str) -> Callable:
    """Imports the function a spec names: "pkg.module:fn", "path/to/file.py:fn" (or "Class.method").

    Raises:
      ValueError: the module or file cannot be found or the name is not a function in it.
    """
    target, _, qualname = spec.strip().rpartition(":")
    if not target or not qualname:
        raise ValueError(f"{spec!r}: expected MODULE:FUNCTION or FILE.py:FUNCTION")
    if target.endswith(".py") or os.sep in target:
        path = os.path.abspath(os.path.expanduser(target))
        if not os.path.isfile(path):
            raise ValueError(f"{spec!r}: no file {path}")
        name = "tfpipe_user_" + os.path.splitext(os.path.basename(path))[0]
        module = sys.modules.get(name)
        if module is None or getattr(module, "__file__", None) != path:
            module_spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module  # so pickling and dataclasses inside the file work
            module_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as e:
            raise ValueError(f"{spec!r}: cannot import {target!r} ({e}); pass a module on PYTHONPATH "
                             f"or a FILE.py path") from None
    fn: Any = module
    for part in qualname.split("."):
        if not hasattr(fn, part):
            raise ValueError(f"{spec!r}: {target} has no {qualname!r}")
        fn = getattr(fn, part)
    if not callable(fn):
        raise ValueError(f"{spec!r}: {qualname} is a {type(fn).__name__}, not a function")
    return fn


def _check_dataset(result: Any, spec: str, what: str) -> Any:
    """The Dataset a user function returned, or a ValueError saying what it returned instead."""
    import tensorflow as tf

    if isinstance(result, tf.data.Dataset):
        return result
    got = type(result).__name__
    if isinstance(result, (tuple, list)):
        got = f"a {got} of {len(result)} ({', '.join(type(r).__name__ for r in result)})"
    raise ValueError(f"{what} {spec!r} returned {got}, not a tf.data.Dataset; bench iterates datasets: "
                     f"return the dataset itself (Estimator accepts a Dataset from an input_fn) instead of "
                     f"iterator.get_next() tensors")


def call_dataset_fn(spec: str, pipeline: Any, mode: str) -> Any:
    """FUNCTION(pipeline, mode) -> tf.data.Dataset."""
    return _check_dataset(load_fn(spec)(pipeline, mode), spec, "dataset_fn")


def call_input_fn(spec: str, batch_size: int, mode: str = "train") -> Any:
    """Calls an Estimator input_fn the way Estimator does: only the arguments it names.

    `params` is {"batch_size": batch_size}; `config` and `input_context` are None (one
    pipeline, no RunConfig), `mode` is the mode.
    """
    fn = load_fn(spec)
    available = {"mode": mode, "params": {"batch_size": batch_size}, "config": None, "input_context": None}
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        parameters = {}
    unknown = [n for n, p in parameters.items()
               if n not in _INPUT_FN_ARGS and p.default is p.empty
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if unknown:
        raise ValueError(f"input_fn {spec!r} requires {', '.join(unknown)}; an Estimator input_fn takes only "
                         f"{', '.join(_INPUT_FN_ARGS)} (bind the rest, e.g. with functools.partial or a lambda "
                         f"inside a module-level function)")
    return _check_dataset(fn(**{n: available[n] for n in parameters if n in _INPUT_FN_ARGS}), spec, "input_fn")
