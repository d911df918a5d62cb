"""Audio: wav -> log-mel (or waveform). AudioConfig, ops, the wav scan,
offline decoding for shard writers, and the synthetic corpus."""

from tfpipe.core.source import register_domain
from tfpipe.domains.audio.config import AudioConfig  # noqa: F401
from tfpipe.domains.audio.domain import AudioDomain

DOMAIN = register_domain(AudioDomain())
