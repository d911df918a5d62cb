"""Old import path of the shard storage: see tfpipe.storage (codec, formats, index, plan, writer, verify)."""

from __future__ import annotations

from typing import Any, Optional

from tfpipe.errors import DataError
from tfpipe.storage.index import (INDEX_NAME, check_counts, fsync_dir, make_index, sha256_file,  # noqa: F401
                                  size_problem, write_json_atomic)
from tfpipe.storage.plan import ShardSpec, plan_shards, shard_name  # noqa: F401
from tfpipe.storage.shard_job import PATH_KEY  # noqa: F401
from tfpipe.storage.source import ShardSource, check_features, read_folder  # noqa: F401

FORMAT = "tfpipe-shards"  # version-1 folders' format name (still read)
VERSION = 2
STORES = ("log_mel", "waveform")
DTYPES = ("float16", "float32")
LABEL_KEY = "label"


def __getattr__(name: str) -> Any:
    # The writer and verify load the domains' offline code; readers of shards should not pay for that.
    if name in ("write_shards", "write_shards_with_stats", "WriteStats"):
        from tfpipe.storage import writer

        return getattr(writer, name)
    if name in ("verify_shards", "verify_folder", "ShardCheck"):
        from tfpipe.storage import verify

        return getattr(verify, name)
    raise AttributeError(f"module 'tfpipe.shards' has no attribute {name!r}")


def stored_class_counts(source: ShardSource) -> Optional[list[int]]:
    """Examples per class from the index (None for folders written before it recorded them)."""
    shards = source.index["shards"]
    if not shards or any(s.get("class_counts") is None for s in shards):
        return None
    return [sum(column) for column in zip(*(s["class_counts"] for s in shards))]


def merge_index(out_dir: str, num_hosts: Optional[int] = None) -> dict:
    """Retired with the hand-run multi-host mode: raises DataError explaining the Beam replacement."""
    raise DataError(f"{out_dir}: merging the partial indexes of hand-run hosts is retired; write on several "
                    f"machines with Apache Beam instead: tfpipe prepare --runner=beam --beam_options="
                    f"'--runner=FlinkRunner ...' (write_shards(..., runner='beam')); the index is written by "
                    f"the launching process when every shard is done")
