"""Old names and import paths, in one module: each still works and says where the name lives now.

tfpipe's public names are in `tfpipe/__init__.py` and its modules' canonical paths. Names
that earlier versions exported elsewhere resolve here, with a DeprecationWarning naming the
new home: whole modules that moved (MOVED_MODULES), modules whose names went to several homes
(MOVED_NAMES), modules still there that some names left (MOVED_OUT), a module whose path is a
package now (MOVED_INTO_PACKAGES). Public paths whose module moved (PUBLIC_MODULES) are the
module itself, without a warning. Nothing in tfpipe imports an old path or this module;
`tfpipe/__init__.py` only installs the finders below, so `import tfpipe.shards` works without
a `tfpipe/shards.py`.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import pkgutil
import sys
import types
import warnings
from typing import Any

# Old modules that moved whole: old path -> new path.
MOVED_MODULES = {
    "tfpipe.audio": "tfpipe.domains.audio.ops",
    "tfpipe.synthetic": "tfpipe.domains.audio.synthetic",
    "tfpipe.bench_worker": "tfpipe.bench.worker",
    "tfpipe.bench_report": "tfpipe.bench.report",
    "tfpipe.service_watch": "tfpipe.service.watch",
    "tfpipe.service_bench": "tfpipe.service.bench",
    "tfpipe.ports": "tfpipe.service.ports",
    "tfpipe.estimator_wait": "tfpipe.train.wait_hook",
    "tfpipe.wait": "tfpipe.train.wait",
    "tfpipe.bench.prepare": "tfpipe.bench.prepare_timing",
    "tfpipe.domains.audio.keras": "tfpipe.domains.audio.recipes",
    "tfpipe.domains.image.keras": "tfpipe.domains.image.recipes",
}

# Old modules whose path is now a package: a name the package lacks resolves in the first of the new
# modules that has it. (tfpipe.service was one module; it is the tf.data service's package now, kept
# free of TensorFlow.)
MOVED_INTO_PACKAGES: dict[str, tuple[str, ...]] = {
    "tfpipe.service": ("tfpipe.service.client", "tfpipe.service.servers"),
}

# Modules that are still there, some of whose names moved out: module -> {name: "new.module:name"}.
MOVED_OUT: dict[str, dict[str, str]] = {
    "tfpipe.core.source": {
        **{n: f"tfpipe.core.registry:{n}" for n in ("register_domain", "register_folder_reader", "domains",
                                                    "get_domain", "domain_of")},
        **{n: f"tfpipe.core.files:{n}" for n in ("FileSource", "tf_paths", "folder", "from_lists", "label_ids",
                                                 "MAX_LISTED")},
    },
    "tfpipe.core.plugins": {n: f"tfpipe.core.registry:{n}" for n in ("register_distributor", "distributor")},
    "tfpipe.core.files": {n: f"tfpipe.core.checks:{n}" for n in ("FileProblem", "check_files", "unreadable")},
}

# Public module paths that live elsewhere now: the same module object, no warning (users and the
# README import them: `import tfpipe.estimator`, `from tfpipe.keras import InputWaitCallback`).
PUBLIC_MODULES = {
    "tfpipe.estimator": "tfpipe.train.estimator",
    "tfpipe.keras": "tfpipe.train.keras",
}

# Old modules whose names went to several new homes: old path -> {name: "new.module:name"}.
# A name not listed falls through to the MOVED_MODULES entry of the same old path, if any.
MOVED_NAMES: dict[str, dict[str, str]] = {
    "tfpipe": {
        "FeatureConfig": "tfpipe.domains.audio.config:AudioConfig",
        "find_examples": "tfpipe.core.source:find",
        "merge_index": "tfpipe.compat:merge_index",
    },
    "tfpipe.bench_report": {"plot_bench": "tfpipe.bench.chart:plot_bench",
                            "PrepareResult": "tfpipe.bench.prepare_timing:PrepareResult"},
    "tfpipe.pipeline": {
        **{n: f"tfpipe.core.chain:{n}" for n in ("AUTOTUNE", "EVAL", "PREDICT", "TRAIN", "build_dataset",
                                                 "normalize_mode")},
        "shard_for_input_context": "tfpipe.core.transforms:shard_for_input_context",
        "dataset_ops": "tfpipe.core.graph:dataset_ops",
        "Data": "tfpipe.core.source:Data",
        "compose": "tfpipe.core.stage:compose",
        "wav_file_table": "tfpipe.domains.audio.domain:wav_file_table",
        "wav_stage_fns": "tfpipe.domains.audio.domain:wav_stage_fns",
    },
    "tfpipe.sources": {
        "INDEX_NAME": "tfpipe.storage.index:INDEX_NAME",
        "FileSource": "tfpipe.core.files:FileSource",
        "Source": "tfpipe.core.files:FileSource",  # v1's Source was the file list
        "folder": "tfpipe.core.files:folder",
        "find_examples": "tfpipe.core.source:find",
        "WavLayout": "tfpipe.domains.audio.scan:WavLayout",
        "scan_wavs": "tfpipe.domains.audio.scan:scan_wavs",
    },
    "tfpipe.shards": {
        **{n: f"tfpipe.storage.index:{n}" for n in ("INDEX_NAME", "check_counts", "fsync_dir", "make_index",
                                                    "sha256_file", "size_problem", "write_json_atomic")},
        **{n: f"tfpipe.storage.plan:{n}" for n in ("ShardSpec", "plan_shards", "shard_name")},
        **{n: f"tfpipe.storage.source:{n}" for n in ("ShardSource", "check_features", "read_folder")},
        **{n: f"tfpipe.storage.writer:{n}" for n in ("write_shards", "write_shards_with_stats", "WriteStats")},
        **{n: f"tfpipe.storage.verify:{n}" for n in ("verify_shards", "verify_folder", "ShardCheck")},
        "PATH_KEY": "tfpipe.storage.shard_job:PATH_KEY",
        "DataError": "tfpipe.errors:DataError",
        "merge_index": "tfpipe.compat:merge_index",
    },
    "tfpipe.shard_writer": {
        **{n: f"tfpipe.domains.audio.offline:{n}" for n in ("load_clip", "log_mel_fn", "pad_clips")},
        "write_shard": "tfpipe.storage.shard_job:write_shard",
        **{n: f"tfpipe.storage.writer:{n}" for n in ("write_shards", "write_shards_with_stats", "WriteStats")},
    },
}


def resolve(old_module: str, name: str) -> Any:
    """The object an old `old_module.name` refers to now (DeprecationWarning), or AttributeError."""
    target = (MOVED_NAMES.get(old_module) or MOVED_OUT.get(old_module) or {}).get(name)
    moved = MOVED_MODULES.get(old_module) or next(
        (m for m in MOVED_INTO_PACKAGES.get(old_module, ()) if hasattr(importlib.import_module(m), name)),
        MOVED_INTO_PACKAGES.get(old_module, (None,))[0])
    if target:
        module, _, attr = target.partition(":")
        new = f"{module}.{attr}"
    elif moved:
        module, attr = moved, name
        new = f"{module}.{attr}"
    else:
        raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
    warnings.warn(f"{old_module}.{name} is deprecated: use {new}", DeprecationWarning, stacklevel=3)
    return getattr(importlib.import_module(module), attr)


def merge_index(out_dir: str, num_hosts: Any = None) -> dict:
    """Retired with the hand-run multi-host mode: raises DataError explaining the Beam replacement."""
    from tfpipe.errors import DataError

    raise DataError(f"{out_dir}: merging the partial indexes of hand-run hosts is retired; write on several "
                    f"machines with Apache Beam instead: tfpipe prepare --runner=beam --beam_options="
                    f"'--runner=FlinkRunner ...' (write_shards(..., runner='beam')); the index is written by "
                    f"the launching process when every shard is done")


class _OldModule(types.ModuleType):
    """A stand-in for an old module path: each attribute resolves to its new home on first use."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return resolve(self.__name__, name)  # not cached: every use of an old name says so


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old module paths (tfpipe.shards, tfpipe.audio, ...) that no longer have files,
    and the public paths whose module lives elsewhere now (tfpipe.estimator, tfpipe.keras)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED_MODULES or fullname in PUBLIC_MODULES or (fullname in MOVED_NAMES
                                                                       and fullname != "tfpipe"):
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec):
        if spec.name in PUBLIC_MODULES:
            module = importlib.import_module(PUBLIC_MODULES[spec.name])
            spec.loader_state = module.__spec__  # the import is about to set the public path's spec on it
            return module
        return _OldModule(spec.name)

    def exec_module(self, module):
        if module.__spec__.name in PUBLIC_MODULES:  # the module itself, served as it is
            module.__spec__ = module.__spec__.loader_state
            return
        new = MOVED_MODULES.get(module.__name__) or "its new modules"
        warnings.warn(f"import {module.__name__} is deprecated: use {new}", DeprecationWarning, stacklevel=2)


class _KeptFinder(importlib.abc.MetaPathFinder):
    """Finds the modules that are still there (MOVED_OUT, MOVED_INTO_PACKAGES) as usual, then lets the
    names that left them resolve on them through `resolve`, without the module importing this one."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED_OUT and fullname not in MOVED_INTO_PACKAGES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _OldNamesLoader(spec.loader)
        return spec


class _OldNamesLoader(importlib.abc.Loader):
    """Runs the module's own loader, then gives the module a `__getattr__` for the names that left it."""

    def __init__(self, loader: Any):
        self._loader = loader

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ...: the module's own loader's
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _serve_old_names(module)


def _serve_old_names(module: types.ModuleType) -> None:
    """Gives a module that is still there a `__getattr__` for the names that left it."""
    own = module.__dict__.get("__getattr__")
    if getattr(own, "_tfpipe_compat", False):
        return
    submodules = {m.name for m in pkgutil.iter_modules(getattr(module, "__path__", []))}
    moved_out = MOVED_OUT.get(module.__name__, {})

    def old_name(name: str) -> Any:
        if own is not None:
            try:
                return own(name)
            except AttributeError:
                pass
        if name in moved_out or (module.__name__ in MOVED_INTO_PACKAGES and not name.startswith("__")
                                 and name not in submodules):  # `from package import submodule` asks first
            return resolve(module.__name__, name)
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")

    old_name._tfpipe_compat = True
    module.__getattr__ = old_name


def install() -> None:
    """Lets the old module paths import (once per process)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        # First: an old path has no file in the package (a test checks), so nothing else should find
        # one elsewhere (e.g. an editable install of another checkout that still has it).
        sys.meta_path.insert(0, _Finder())
    if not any(isinstance(f, _KeptFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _KeptFinder())
    for name in list(MOVED_OUT) + list(MOVED_INTO_PACKAGES):  # those imported before this ran
        if name in sys.modules:
            _serve_old_names(sys.modules[name])
