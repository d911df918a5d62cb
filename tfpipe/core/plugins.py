"""Loading the plug-ins the core serves: domains, storage formats, source kinds, the data service.

The core never names a plug-in. The package's top (`tfpipe/__init__.py`) declares the
built-in ones, and other packages add theirs through the `tfpipe.plugins` entry-point
group; each plug-in module registers what it defines when imported, in `tfpipe.core.registry`
(a domain with `register_domain`, a folder reader with `register_folder_reader`, the data
service with `register_distributor`). The registry's lookups import them here on first use,
so `import tfpipe` stays cheap.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import Iterable, Optional

ENTRY_POINT_GROUP = "tfpipe.plugins"
_declared: list[str] = []
_loaded: set[str] = set()
_entry_points: Optional[list[str]] = None  # the group's modules, read once per process


def declare(modules: Iterable[str]) -> None:
    """Adds plug-in modules to import on the first lookup (the package's top declares the built-in ones)."""
    _declared.extend(m for m in modules if m not in _declared)


def modules() -> list[str]:
    """The declared and entry-point plug-in modules, by name, none imported.

    The entry points are read once per process: reading them opens every installed package's
    metadata (~13 ms with TensorFlow's ~200 dependencies), and `load` runs on every lookup
    (once per file when a folder is listed), which made listing 2,000 files take 26 s.
    """
    global _entry_points
    if _entry_points is None:
        try:
            _entry_points = [ep.value for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)]
        except Exception:  # broken metadata of an unrelated package must not stop tfpipe
            _entry_points = []
    return _declared + [m for m in _entry_points if m not in _declared]


def load() -> None:
    """Imports every plug-in module once (each registers itself)."""
    for name in modules():
        if name not in _loaded:
            _loaded.add(name)
            importlib.import_module(name)

