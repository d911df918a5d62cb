"""Old import path of the shard writer: see tfpipe.storage.writer (and the domains' offline code)."""

from tfpipe.domains.audio.offline import load_clip, log_mel_fn, pad_clips  # noqa: F401  (the demo's predict)
from tfpipe.storage.shard_job import write_shard  # noqa: F401
from tfpipe.storage.writer import WriteStats, write_shards, write_shards_with_stats  # noqa: F401
