"""Domain-free shard storage: codec, formats, index, plan, writers (local, Beam), reader, verify.

Importing it registers the shard-folder reader with the core (a folder with tfpipe.json is a
ShardSource). The writers load on first use: readers of shards do not pay for them.
"""

import importlib

from tfpipe.storage import source  # noqa: F401  (registers read_folder)
from tfpipe.storage.index import INDEX_NAME  # noqa: F401
from tfpipe.storage.plan import ShardSpec, plan_shards, shard_name  # noqa: F401
from tfpipe.storage.source import ShardSource, read_folder  # noqa: F401

_LAZY = {"write_shards": "tfpipe.storage.writer", "write_shards_with_stats": "tfpipe.storage.writer",
         "WriteStats": "tfpipe.storage.writer", "verify_shards": "tfpipe.storage.verify",
         "verify_folder": "tfpipe.storage.verify"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tfpipe.storage' has no attribute {name!r}")
