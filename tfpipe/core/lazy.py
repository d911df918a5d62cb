"""A module imported on first use, so that a domain's module imports without TensorFlow.

    tf = lazy.module("tensorflow")  # nothing imported yet
    tf.constant(1)                  # TensorFlow loads here

The command line lists the registered domains, their flags and corpora before any work
(`tfpipe synth`, `--help`, flag errors in a fraction of a second instead of TensorFlow's ~5 s);
a domain module binds `tf` and its own TensorFlow ops module this way and uses them in its
methods and stage functions, which run only when a chain, shards or a signature are built.
Unlike `importlib.util.LazyLoader` nothing is put in `sys.modules` before the first use, so
"is TensorFlow loaded" stays a plain `"tensorflow" in sys.modules`.
"""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """Stands for the module `name`; its attributes are the module's, imported on first access."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        # Only called for names this object lacks: every module attribute (tf.data, ops.decode, ...).
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def module(name: str) -> LazyModule:
    """A stand-in for the module `name` that imports it on first attribute access."""
    return LazyModule(name)
