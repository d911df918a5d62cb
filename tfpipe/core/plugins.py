"""Loading the plug-ins the core serves: domains, storage formats, source kinds, the data service.

The core never names a plug-in. The package's top (`tfpipe/__init__.py`) declares the
built-in ones, and other packages add theirs through the `tfpipe.plugins` entry-point
group; each plug-in module registers what it defines when imported, in `tfpipe.core.registry`
(a domain with `register_domain`, a folder reader with `register_folder_reader`, the data
service with `register_distributor`). The registry's lookups import them here on first use,
so `import tfpipe` stays cheap.

Domain plug-ins are declared apart from the others (`declare(..., domains=True)`): a domain
module imports without TensorFlow, so the command line can list the domains, their flags and
corpora (`tfpipe synth`, `--help`) by loading the domain plug-ins alone, in a fraction of a
second. An entry-point module may be either, so it is loaded in both cases (a domain package
keeps its entry-point module free of TensorFlow for the same reason).
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import Iterable, Optional

ENTRY_POINT_GROUP = "tfpipe.plugins"
_declared: list[str] = []
_domains: set[str] = set()  # the declared modules that register domains (importable without TensorFlow)
_loaded: set[str] = set()
_entry_points: Optional[list[str]] = None  # the group's modules, read once per process


def declare(modules: Iterable[str], *, domains: bool = False) -> None:
    """Adds plug-in modules to import on the first lookup (the package's top declares the built-in ones).

    Args:
      modules: module names; each registers what it defines when imported.
      domains: the modules register domains and import without TensorFlow (see the module doc).
    """
    modules = list(modules)
    _declared.extend(m for m in modules if m not in _declared)
    if domains:
        _domains.update(modules)


def modules(domains_only: bool = False) -> list[str]:
    """The declared and entry-point plug-in modules, by name, none imported.

    `domains_only`: the declared domain modules and the entry points (which may register domains).

    The entry points are read once per process: reading them opens every installed package's
    metadata (~13 ms with TensorFlow's ~200 dependencies), and `load` runs on every lookup
    (once per file when a folder is listed), which made listing 2,000 files take 26 s.
    """
    global _entry_points
    if _entry_points is None:
        try:
            _entry_points = [ep.module for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)]
        except Exception:  # broken metadata of an unrelated package must not stop tfpipe
            _entry_points = []
    declared = [m for m in _declared if m in _domains] if domains_only else _declared
    return declared + [m for m in _entry_points if m not in _declared]


def load(domains_only: bool = False) -> None:
    """Imports every plug-in module once (each registers itself); `domains_only`: as `modules` says."""
    for name in modules(domains_only):
        if name not in _loaded:
            _loaded.add(name)
            importlib.import_module(name)

