"""The image domain: JPEG/PNG files -> {"image": [H, W, 3]}, online, from shards, and served."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from tfpipe.core import lazy
from tfpipe.core.domain import Corpus, Domain, check_stored_fields
from tfpipe.core.registry import register_domain
from tfpipe.core.stage import Stage
from tfpipe.domains.image.config import CHANNELS, STORES, ImageConfig, ImageCorpusConfig

# Loaded on first use: this module imports without TensorFlow (tfpipe.core.lazy says why).
tf = lazy.module("tensorflow")
ops = lazy.module("tfpipe.domains.image.ops")
files = lazy.module("tfpipe.core.files")


# Fields that fix the stored images (their size and framing): shards serve only a pipeline asking
# for the same ones. Augmentation, dtype and the size guard apply after reading and may differ.
_STORED_FIELDS = ("height", "width", "eval_crop")
SERVING_KEY = "image_bytes"  # "_bytes": TF Serving's REST API then takes {"b64": ...} values


def image_stage_fns(config: ImageConfig, train: bool, ratios: Optional[Sequence[int]] = None,
                    formats: Sequence[str] = ("JPEG", "PNG")):
    """read, decode over ((path, file size, shape), label) elements, as `ImageDomain.file_table`
    makes them; tfpipe.bench times them one by one.

    read fails, naming the file, when it no longer has the size the scan saw (replaced or cut after
    the pipeline was built): decoding it would fail naming nothing. decode crops at random from the
    shape the scan read (no header parse per epoch), with only the decode scales and formats the
    scan found possible (`ratios`, `formats`: one of each, no per-image branch), and gives the image
    in config's dtype (made per image, in cache: tfpipe.domains.image.ops._finish says why).
    """
    ratios = ops.JPEG_RATIOS if ratios is None else ratios  # None: every scale (ops loads on use)

    def read(file, label):
        path, size, shape = file
        contents = tf.io.read_file(path)
        # raw Assert with the path as data: tf.debugging.Assert wraps itself in a cond (a function call
        # per example), and a joined message would be built for every image, not only a bad one.
        check = tf.raw_ops.Assert(condition=tf.equal(tf.strings.length(contents), size), data=[path, tf.constant(
            "changed since the pipeline was built (no longer the file of the size checked then: replaced or "
            "cut); build the dataset again (a new build_dataset or input_fn call) so the file is checked again")])
        with tf.control_dependencies([check]):
            return (tf.identity(contents), shape), label

    def decode(file, label):
        contents, shape = file
        image = ops.preprocess(contents, config, train, shape, ratios=ratios, formats=formats)
        return {config.feature_key: image}, label

    return read, decode


class ImageDomain(Domain):
    """JPEG and PNG online (headers scanned up front); anything PIL reads offline."""

    name = "image"
    extensions = (".jpg", ".jpeg", ".png")
    config_class = ImageConfig
    kind = "image"
    corpus = Corpus("tfpipe.domains.image.synthetic:write_files", ImageCorpusConfig,
                    "8 learnable classes of JPEG/PNG shapes of mixed sizes and modes")
    recipes = {"keras": "tfpipe.domains.image.recipes:keras_recipe",
               "tf-models": "tfpipe.domains.image.recipes:tf_models_recipe"}
    serving_sends = "encoded image files"

    def file_table(self, paths: Sequence[str], config: ImageConfig) -> Any:
        return self._table(paths, self._scan(paths, config))

    def reading(self, paths: Sequence[str], config: ImageConfig, mode: str) -> tuple[Any, list[Stage]]:
        """The file table and stages specialized to what the scan found: the formats present and the
        decode scales the images' sizes allow (tiny images: one format, one scale, no branch)."""
        scanned = self._scan(paths, config)
        ratios = ops.usable_ratios([s.shape for s in scanned], config, mode == "train")
        return self._table(paths, scanned), self.stages(config, mode, ratios, sorted({s.format for s in scanned}))

    @staticmethod
    def _scan(paths: Sequence[str], config: ImageConfig) -> Any:
        from tfpipe.domains.image.scan import scan_images  # PIL loads here only

        return scan_images(paths, config)  # every unusable file is named here, before training

    @staticmethod
    def _table(paths: Sequence[str], scanned: Any) -> Any:
        # Sizes as int32 (what tf.strings.length gives: no cast per image); max_pixels bounds them.
        return (files.tf_paths(paths), tf.constant([s.size for s in scanned], tf.int32),
                tf.constant([s.shape for s in scanned], tf.int32, shape=[len(scanned), CHANNELS]))

    def stages(self, config: ImageConfig, mode: str, ratios: Optional[Sequence[int]] = None,
               formats: Sequence[str] = ("JPEG", "PNG")) -> list[Stage]:
        train = mode == "train"
        read, decode = image_stage_fns(config, train, ratios, formats)
        # read (the encoded bytes) is deterministic, so a cache keeps it and the random crop and
        # flip of decode are drawn anew each epoch. Images differ in size until resized, so decode
        # runs per example, and makes the dtype there too, while the image is in cache.
        return [Stage("read", read, fixed_shape=True),
                Stage("decode", decode, random=train, fixed_shape=True, example_bytes=_image_bytes(config))]

    def stores(self) -> tuple[str, ...]:
        return STORES

    def offline(self, config: ImageConfig, store: str):
        from tfpipe.domains.image.offline import ImageOffline  # PIL loads here only

        return ImageOffline(config, store)

    def stored_stages(self, stored: Mapping[str, Any], config: ImageConfig, mode: str = "eval") -> list[Stage]:
        """Stored JPEG bytes or raw uint8 pixels -> the crop/flip/resize of `mode`, then config's dtype.

        Images stored at a bounded shorter side (max_side) serve any output size; those stored
        before it (center-cropped to a fixed size) only the size they were cut for.
        """
        from tfpipe.domains.image.offline import FIXED_RAW_KEY, JPEG_KEY, RAW_KEY, SHAPE_KEY

        fixed = "max_side" not in stored["config"]  # an index written before max_side existed
        if fixed:
            check_stored(stored, config)
        train = mode == "train"
        key = config.feature_key
        if stored["store"] == "jpeg":
            def decode(values, labels):
                jpeg = values[JPEG_KEY]
                return {key: ops.preprocess(jpeg, config, train, tf.io.extract_jpeg_shape(jpeg))}, labels
        elif fixed:
            def decode(values, labels):
                image = tf.saturate_cast(values[FIXED_RAW_KEY], tf.uint8)  # a reader may hand back another dtype
                return {key: ops.preprocess_decoded(image, config, train)}, labels
        else:
            def decode(values, labels):
                pixels = tf.io.decode_raw(values[RAW_KEY], tf.uint8)  # a copy of the bytes, no decode
                image = tf.ensure_shape(tf.reshape(pixels, values[SHAPE_KEY]), [None, None, CHANNELS])
                return {key: ops.preprocess_decoded(image, config, train)}, labels
        return [Stage("decode", decode, random=train, fixed_shape=True, example_bytes=_image_bytes(config))]

    def record_stages(self, config: ImageConfig, mode: str, key: str) -> list[Stage]:
        """An encoded JPEG/PNG held in records under `key` -> {feature_key: image}: the same fused
        decode-and-crop as files (train: random crop decoded alone, flip; eval: center crop), the
        dtype made per image. The shape comes from the image's header (no scan of records)."""
        train = mode == "train"
        out = config.feature_key

        def decode(features, label):
            features = dict(features)
            contents = features.pop(key)
            features[out] = ops.preprocess(contents, config, train)
            return features, label

        return [Stage("decode", decode, random=train, fixed_shape=True, example_bytes=_image_bytes(config))]

    def serving_receiver(self, config: ImageConfig) -> tuple[dict, dict]:
        """Encoded JPEG/PNG files in (string [batch]), the eval features out: center crop, resize, dtype."""
        encoded = tf.compat.v1.placeholder(tf.string, [None], name=SERVING_KEY)
        images = tf.map_fn(lambda contents: ops.preprocess(contents, config, train=False), encoded,
                           fn_output_signature=tf.TensorSpec(config.feature_shape, tf.as_dtype(config.dtype)))
        return {SERVING_KEY: encoded}, {config.feature_key: images}

    def serving_inputs(self, paths: Sequence[str], config: ImageConfig) -> dict:
        """Each file's bytes as they are (the signature decodes JPEG and PNG of any size)."""
        import numpy as np

        from tfpipe.core import filesystem as fs  # a gs:// or s3:// file too

        return {SERVING_KEY: np.array([fs.read_bytes(path) for path in paths], dtype=object)}

    def model_input(self, features: Mapping[str, Any], config: ImageConfig) -> Any:
        """The images, normalized by ImageNet's per-channel mean and std (unless the pipeline did)."""
        image = features[config.feature_key]
        return image if config.normalize else ops.normalize(image)


def _image_bytes(config: ImageConfig) -> int:
    """Bytes of one output image."""
    return config.height * config.width * CHANNELS * (1 if config.dtype == "uint8" else 4)


def check_stored(stored: Mapping[str, Any], config: ImageConfig, where: str = "the shard index") -> None:
    """DataError naming each field where the stored images differ from the requested ones."""
    check_stored_fields(stored["config"], config, _STORED_FIELDS, where)


DOMAIN = register_domain(ImageDomain())
