"""The image domain: JPEG/PNG files -> {"image": [H, W, 3]}, online, from shards, and served."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import tensorflow as tf

from tfpipe.core.domain import Domain, check_stored_fields
from tfpipe.core.stage import Stage
from tfpipe.domains.image import ops
from tfpipe.domains.image.config import ImageConfig


# Fields that fix the stored images (their size and framing): shards serve only a pipeline asking
# for the same ones. Augmentation, dtype and the size guard apply after reading and may differ.
_STORED_FIELDS = ("height", "width", "eval_crop")
SERVING_KEY = "image_bytes"  # "_bytes": TF Serving's REST API then takes {"b64": ...} values


def image_stage_fns(config: ImageConfig, train: bool):
    """read, decode, scale over (path, label) elements; tfpipe.bench times them one by one.

    decode works on one image (sizes differ until resized); scale on one or a batch.
    """

    def read(path, label):
        return tf.io.read_file(path), label

    def decode(contents, label):
        return ops.preprocess(contents, config, train), label

    def scale(image, label):
        return {config.feature_key: ops.to_dtype(image, config.dtype)}, label

    return read, decode, scale


class ImageDomain(Domain):
    """JPEG and PNG online (headers scanned up front); anything PIL reads offline."""

    name = "image"
    extensions = (".jpg", ".jpeg", ".png")
    config_class = ImageConfig
    kind = "image"

    def file_table(self, paths: Sequence[str], config: ImageConfig) -> Any:
        from tfpipe.domains.image.scan import scan_images  # PIL loads here only

        scan_images(paths, config)  # every unusable file is named here, before training
        return list(paths)

    def stages(self, config: ImageConfig, mode: str) -> list[Stage]:
        read, decode, scale = image_stage_fns(config, train=mode == "train")
        # Images differ in size until resized, so decode runs per example; the dtype cast is the
        # part that works on whole batches (with vectorize, batches are built from uint8 bytes).
        return [Stage("read", read), Stage("decode", decode), Stage("scale", scale, batchable=True)]

    def stores(self) -> tuple[str, ...]:
        from tfpipe.domains.image.offline import STORES

        return STORES

    def offline(self, config: ImageConfig, store: str):
        from tfpipe.domains.image.offline import ImageOffline  # PIL loads here only

        return ImageOffline(config, store)

    def stored_stages(self, stored: Mapping[str, Any], config: ImageConfig, mode: str = "eval") -> list[Stage]:
        """Stored JPEG bytes or raw uint8 images -> the crop/flip/resize of `mode`, then config's dtype."""
        from tfpipe.domains.image.offline import JPEG_KEY, RAW_KEY

        check_stored(stored, config)
        train = mode == "train"
        _, _, scale = image_stage_fns(config, train)
        if stored["store"] == "jpeg":
            def decode(values, labels):
                return ops.preprocess(values[JPEG_KEY], config, train), labels
        else:
            def decode(values, labels):
                image = tf.saturate_cast(values[RAW_KEY], tf.uint8)  # a reader may hand back another dtype
                return ops.preprocess_decoded(image, config, train), labels
        return [Stage("decode", decode), Stage("scale", scale, batchable=True)]

    def serving_receiver(self, config: ImageConfig) -> tuple[dict, dict]:
        """Encoded JPEG/PNG files in (string [batch]), the eval features out: center crop, resize, dtype."""
        encoded = tf.compat.v1.placeholder(tf.string, [None], name=SERVING_KEY)
        images = tf.map_fn(lambda contents: ops.preprocess(contents, config, train=False), encoded,
                           fn_output_signature=tf.TensorSpec(config.feature_shape, tf.uint8))
        return {SERVING_KEY: encoded}, {config.feature_key: ops.to_dtype(images, config.dtype)}


def check_stored(stored: Mapping[str, Any], config: ImageConfig, where: str = "the shard index") -> None:
    """DataError naming each field where the stored images differ from the requested ones."""
    check_stored_fields(stored["config"], config, _STORED_FIELDS, where)
