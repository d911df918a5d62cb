"""Images: JPEG/PNG -> {"image": [H, W, 3]}. ImageConfig, ops (fused decode-and-crop, flip, resize,
normalize), the header scan, offline resize-once for shard writers, the synthetic corpus and the
Keras recipe a user would otherwise write."""

from tfpipe.core.source import register_domain
from tfpipe.domains.image.config import ImageConfig  # noqa: F401
from tfpipe.domains.image.domain import ImageDomain

DOMAIN = register_domain(ImageDomain())
