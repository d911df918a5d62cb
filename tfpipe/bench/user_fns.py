"""A user's own pipeline functions: "MODULE:FUNCTION" / "FILE.py:FUNCTION" specs, loaded and called.

Each bench variant runs in a process of its own, so a user's function travels there as
its spec string and is imported again on the other side. The parent loads each spec once
first (`check`), so a spec that names nothing is a usage error before any worker starts;
a function that raises is named with the exception and the line it came from.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import traceback
from typing import Any, Callable, Union

# What an Estimator passes to an input_fn that names the argument (estimator.py, _call_input_fn).
_INPUT_FN_ARGS = ("mode", "params", "config", "input_context")


class FunctionSpecError(ValueError):
    """A user function's spec names nothing callable as asked (a usage problem: `tfpipe bench` exits 2)."""


class UserFunctionError(RuntimeError):
    """A user's function raised: names the function, the exception and where (`tfpipe bench` exits 1)."""


def fn_spec(fn: Union[str, Callable]) -> str:
    """"MODULE:QUALNAME" of a module-level function (a file path for one defined in __main__).

    Args:
      fn: a spec string (returned as is, stripped) or a function defined at module level.

    Raises:
      FunctionSpecError: a lambda, a nested function or anything else another process cannot import.
    """
    if isinstance(fn, str):
        spec = fn.strip()
        if not spec.partition(":")[0] or not spec.partition(":")[2]:
            raise FunctionSpecError(f"{fn!r}: expected MODULE:FUNCTION or FILE.py:FUNCTION")
        return spec
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not callable(fn) or not module or "<" in qualname:
        raise FunctionSpecError(f"{fn!r}: bench runs each variant in its own process, which imports the function "
                                f"by name; pass a function defined at module level (not a lambda or nested "
                                f"function), or its 'MODULE:FUNCTION' / 'FILE.py:FUNCTION' spec")
    if module == "__main__":
        path = getattr(sys.modules["__main__"], "__file__", None)
        if not path:
            raise FunctionSpecError(f"{qualname}: defined in an interactive session; put it in a .py file and pass "
                                    f"'FILE.py:{qualname}'")
        module = os.path.abspath(path)
    return f"{module}:{qualname}"


def load_fn(spec: str) -> Callable:
    """Imports the function a spec names: "pkg.module:fn", "path/to/file.py:fn" (or "Class.method").

    Raises:
      FunctionSpecError: the module or file cannot be found or the name is not a function in it.
      UserFunctionError: importing the user's file or module raised, naming the exception and the line.
    """
    target, _, qualname = spec.strip().rpartition(":")
    if not target or not qualname:
        raise FunctionSpecError(f"{spec!r}: expected MODULE:FUNCTION or FILE.py:FUNCTION")
    fn: Any = _import(spec, target)
    for part in qualname.split("."):
        if not hasattr(fn, part):
            raise FunctionSpecError(f"{spec!r}: {target} has no {qualname!r}")
        fn = getattr(fn, part)
    if not callable(fn):
        raise FunctionSpecError(f"{spec!r}: {qualname} is a {type(fn).__name__}, not a function")
    return fn


def _import(spec: str, target: str) -> Any:
    """The module a spec's target names: a .py file (imported once under a private name) or a module."""
    if not (target.endswith(".py") or os.sep in target):
        try:
            return importlib.import_module(target)
        except ModuleNotFoundError as e:
            if e.name and target.startswith(e.name):  # the module itself, not one it imports
                raise FunctionSpecError(f"{spec!r}: cannot import {target!r} ({e}); pass a module on PYTHONPATH "
                                        f"or a FILE.py path") from None
            raise UserFunctionError(_raised(f"importing {target}", e, None)) from e
        except Exception as e:  # noqa: BLE001  the user's module failed at import: say where
            raise UserFunctionError(_raised(f"importing {target}", e, None)) from e
    path = os.path.abspath(os.path.expanduser(target))
    if not os.path.isfile(path):
        raise FunctionSpecError(f"{spec!r}: no file {path}")
    name = "tfpipe_user_" + os.path.splitext(os.path.basename(path))[0]
    module = sys.modules.get(name)
    if module is None or getattr(module, "__file__", None) != path:
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module  # so pickling and dataclasses inside the file work
        try:
            module_spec.loader.exec_module(module)
        except Exception as e:  # noqa: BLE001  the user's file failed at import: say where
            del sys.modules[name]
            raise UserFunctionError(_raised(f"importing {path}", e, path)) from e
    return module


def _raised(what: str, error: BaseException, user_file: Any) -> str:
    """'dataset_fn f.py:fn raised ZeroDivisionError: division by zero (at /abs/f.py:12, in fn)'.

    Where: the innermost frame in the user's file (the line they wrote), else the innermost one.
    """
    frames = traceback.extract_tb(error.__traceback__)
    if isinstance(error, SyntaxError) and error.filename:
        frames.append(traceback.FrameSummary(error.filename, error.lineno or 0, "<module>"))
    own = [f for f in frames if user_file and os.path.abspath(f.filename) == user_file]
    frame = (own or frames or [None])[-1]
    message = (str(error).strip().splitlines() or [""])[0]
    where = f" (at {frame.filename}:{frame.lineno}, in {frame.name})" if frame else ""
    return f"{what} raised {type(error).__name__}{': ' + message if message else ''}{where}"


def _call(what: str, spec: str, fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """fn(*args, **kwargs); UserFunctionError naming the function, the exception and its line if it raises."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001  anything the user's code raises is theirs to see, in one line
        try:
            user_file = os.path.abspath(inspect.getsourcefile(fn) or "")
        except TypeError:
            user_file = None
        raise UserFunctionError(_raised(f"{what} {spec}", e, user_file)) from e


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
    """FUNCTION(pipeline, mode) -> tf.data.Dataset.

    Raises:
      UserFunctionError: the function raised.
      ValueError: it returned something else than a Dataset.
    """
    return _check_dataset(_call("dataset_fn", spec, load_fn(spec), pipeline, mode), spec, "dataset_fn")


def input_fn_args(spec: str) -> tuple[str, ...]:
    """The arguments an Estimator would pass to the input_fn: those of _INPUT_FN_ARGS it names.

    Raises:
      FunctionSpecError: it requires an argument an Estimator never passes.
    """
    try:
        parameters = inspect.signature(load_fn(spec)).parameters
    except (TypeError, ValueError):
        return ()
    unknown = [n for n, p in parameters.items()
               if n not in _INPUT_FN_ARGS and p.default is p.empty
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if unknown:
        raise FunctionSpecError(f"input_fn {spec!r} requires {', '.join(unknown)}; an Estimator input_fn takes "
                                f"only {', '.join(_INPUT_FN_ARGS)} (bind the rest, e.g. with functools.partial "
                                f"or a lambda inside a module-level function)")
    return tuple(n for n in parameters if n in _INPUT_FN_ARGS)


def call_input_fn(spec: str, batch_size: int, mode: str = "train") -> Any:
    """Calls an Estimator input_fn the way Estimator does: only the arguments it names.

    `params` is {"batch_size": batch_size}; `config` and `input_context` are None (one
    pipeline, no RunConfig), `mode` is the mode.

    Raises:
      FunctionSpecError: it requires an argument an Estimator never passes.
      UserFunctionError: it raised.
      ValueError: it returned something else than a Dataset.
    """
    available = {"mode": mode, "params": {"batch_size": batch_size}, "config": None, "input_context": None}
    args = {n: available[n] for n in input_fn_args(spec)}
    return _check_dataset(_call("input_fn", spec, load_fn(spec), **args), spec, "input_fn")


def check(dataset_fn: str, input_fns: Any) -> None:
    """Loads each spec once in the parent, so one naming nothing fails before any worker starts.

    Raises:
      FunctionSpecError: a spec names no function, or an input_fn takes what an Estimator never passes.
      UserFunctionError: importing the user's file raised.
    """
    if dataset_fn:
        load_fn(dataset_fn)
    for spec in input_fns:
        input_fn_args(spec)
