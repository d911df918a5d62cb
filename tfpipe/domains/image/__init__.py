"""Images: JPEG/PNG -> {"image": [H, W, 3]}. ImageConfig, ops (fused decode-and-crop, flip, resize,
normalize), the header scan, offline resize-once for shard writers, the synthetic corpus and the
reference recipes a user would otherwise write (Keras, tensorflow/models).

The domain registers itself in `domain.py`, which tfpipe imports on the first lookup: importing
the config alone (the command line's flags, `tfpipe SUB --help`) does not start TensorFlow."""

from tfpipe.domains.image.config import ImageConfig  # noqa: F401
