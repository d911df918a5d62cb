"""Domain-free shard storage. Importing it registers the shard-folder reader with the core."""

from tfpipe import shards  # noqa: F401  (registers read_folder: a folder with tfpipe.json is a ShardSource)
