"""tfpipe: TensorFlow input pipelines that keep the accelerator busy.

The public API is re-exported here and loaded on first use, so `import tfpipe`
is cheap and the command line can quiet TensorFlow before TensorFlow loads.
Old names and module paths resolve through `tfpipe.compat` with a DeprecationWarning.
"""

import importlib

from tfpipe import compat as _compat
from tfpipe.core import plugins as _plugins

__version__ = "0.1.0"

_EXPORTS = {
    "DataError": "tfpipe.errors",
    "PipelineConfig": "tfpipe.config",
    "AudioConfig": "tfpipe.domains.audio.config",
    "ImageConfig": "tfpipe.domains.image.config",
    "Stage": "tfpipe.core.stage",
    "python_fn": "tfpipe.core.python_fn",
    "Source": "tfpipe.core.source",
    "FileSource": "tfpipe.core.files",
    "find": "tfpipe.core.source",
    "split": "tfpipe.core.source",
    "build_dataset": "tfpipe.core.chain",
    "describe": "tfpipe.core.describe",
    "records": "tfpipe.storage.records",
    "mix": "tfpipe.core.mixture",
    "dataset_ops": "tfpipe.core.graph",
    "make_input_fn": "tfpipe.train.estimator",
    "serving_input_receiver_fn": "tfpipe.train.estimator",
    "write_shards": "tfpipe.storage.writer",
    "plan_shards": "tfpipe.storage.plan",
    "verify_shards": "tfpipe.storage.verify",
    "quiet": "tfpipe.logs",
}

__all__ = sorted(_EXPORTS) + ["__version__"]

_compat.install()
# The built-in plug-ins, imported on the first lookup (each registers itself with the core). The
# domains' modules import without TensorFlow: the command line lists them before any work.
_plugins.declare(("tfpipe.domains.audio.domain", "tfpipe.domains.image.domain"), domains=True)
_plugins.declare(("tfpipe.storage", "tfpipe.service.client"))


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    if name in _compat.MOVED_NAMES["tfpipe"]:
        return _compat.resolve("tfpipe", name)
    try:
        return importlib.import_module(f"tfpipe.{name}")  # submodules: tfpipe.flags, tfpipe.bench, ...
    except ModuleNotFoundError:
        raise AttributeError(f"module 'tfpipe' has no attribute {name!r}") from None


def __dir__():
    return __all__
