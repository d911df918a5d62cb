"""Audio: wav -> log-mel (or waveform). AudioConfig, ops, the wav scan,
offline decoding for shard writers, the synthetic corpus and the Keras reference recipe.

The domain registers itself in `domain.py`, which tfpipe imports on the first lookup: importing
the config alone (the command line's flags, `tfpipe SUB --help`) does not start TensorFlow."""

from tfpipe.domains.audio.config import AudioConfig  # noqa: F401
