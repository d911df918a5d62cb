"""Domain-free shard storage: codec, formats, index, plan, writers (local, Beam), reader, verify.

Importing it registers the shard-folder reader with the core (a folder with tfpipe.json is a
ShardSource). The reader (and TensorFlow with it) and the writers load on first use: the
command line reads the format registry and an index without starting TensorFlow.
"""

import importlib

from tfpipe.core.registry import register_folder_reader
from tfpipe.storage.index import INDEX_NAME  # noqa: F401
from tfpipe.storage.plan import ShardSpec, plan_shards, shard_name  # noqa: F401

_LAZY = {"write_shards": "tfpipe.storage.writer", "write_shards_with_stats": "tfpipe.storage.writer",
         "WriteStats": "tfpipe.storage.writer", "verify_shards": "tfpipe.storage.verify",
         "verify_folder": "tfpipe.storage.verify", "ShardSource": "tfpipe.storage.source"}


def read_folder(root: str):
    """The ShardSource of a folder with tfpipe.json, else None (tfpipe.storage.source.read_folder)."""
    from tfpipe.storage import source  # TensorFlow loads with the reader, at the first folder looked at

    return source.read_folder(root)


register_folder_reader(read_folder, name="tfpipe.storage.source.read_folder")


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tfpipe.storage' has no attribute {name!r}")
