"""Domain-free shard storage: codec, formats, index, plan, writers (local, Beam), reader, verify.

Importing it registers the shard-folder reader with the core (a folder with tfpipe.json is a
ShardSource), and the readers of TFRecord files (a folder or glob of them is `tfpipe.records`). The reader (and TensorFlow with it) and the writers load on first use: the
command line reads the format registry and an index without starting TensorFlow.
"""

import importlib

from tfpipe.core.registry import register_files_reader, register_folder_reader
from tfpipe.storage.index import INDEX_NAME  # noqa: F401
from tfpipe.storage.plan import ShardSpec, plan_shards, shard_name  # noqa: F401

_LAZY = {"write_shards": "tfpipe.storage.writer", "write_shards_with_stats": "tfpipe.storage.writer",
         "WriteStats": "tfpipe.storage.writer", "verify_shards": "tfpipe.storage.verify",
         "verify_folder": "tfpipe.storage.verify", "ShardSource": "tfpipe.storage.source"}


def read_folder(root: str):
    """The ShardSource of a folder with tfpipe.json, else None (tfpipe.storage.source.read_folder)."""
    from tfpipe.storage import source  # TensorFlow loads with the reader, at the first folder looked at

    return source.read_folder(root)


def read_records_folder(root: str):
    """tfpipe.records(root) for a folder of TFRecord files (named so, or found so by their first
    header), else None: a folder of records reaches build_dataset as records, not as a class folder."""
    from tfpipe.storage import found_records  # no TensorFlow until the folder holds records

    return found_records.records_folder(root)


def read_record_files(what: str, paths):
    """tfpipe.records(what) when the files a glob (or path) names are TFRecords, else None."""
    from tfpipe.storage import found_records

    return found_records.record_files(what, paths)


register_folder_reader(read_folder, name="tfpipe.storage.source.read_folder")
register_folder_reader(read_records_folder, name="tfpipe.storage.found_records.records_folder")
register_files_reader(read_record_files, name="tfpipe.storage.found_records.record_files")


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tfpipe.storage' has no attribute {name!r}")
