"""tfpipe: TensorFlow input pipelines that keep the accelerator busy.

The public API is re-exported here and loaded on first use, so `import tfpipe`
is cheap and the command line can quiet TensorFlow before TensorFlow loads.
"""

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "DataError": "tfpipe.errors",
    "PipelineConfig": "tfpipe.config",
    "FeatureConfig": "tfpipe.domains.audio.config",
    "AudioConfig": "tfpipe.domains.audio.config",
    "ImageConfig": "tfpipe.domains.image.config",
    "Stage": "tfpipe.core.stage",
    "python_fn": "tfpipe.core.stage",
    "FileSource": "tfpipe.core.source",
    "Source": "tfpipe.sources",
    "find_examples": "tfpipe.sources",
    "build_dataset": "tfpipe.core.chain",
    "dataset_ops": "tfpipe.core.chain",
    "make_input_fn": "tfpipe.estimator",
    "serving_input_receiver_fn": "tfpipe.estimator",
    "write_shards": "tfpipe.shards",
    "plan_shards": "tfpipe.shards",
    "merge_index": "tfpipe.shards",
    "verify_shards": "tfpipe.shards",
    "quiet": "tfpipe.logs",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    try:
        return importlib.import_module(f"tfpipe.{name}")  # submodules: tfpipe.flags, tfpipe.bench, ...
    except ModuleNotFoundError:
        raise AttributeError(f"module 'tfpipe' has no attribute {name!r}") from None


def __dir__():
    return __all__
