"""Pure image ops: decode (JPEG: only the crop), crop windows, flip, resize, dtype, normalize.

Every op is a small TensorFlow function of one example (`to_dtype` and `normalize`
also of a batch), run by the online pipeline, by stored-shard stages and by the
serving signature alike, so the three agree exactly. Images are uint8 RGB until
`to_dtype`: the pipeline copies and batches bytes, not floats.
"""

from __future__ import annotations

import functools
import math
from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf

from tfpipe.domains.image.config import CHANNELS, ImageConfig

# ImageNet statistics of RGB values in [0, 1]: what pretrained models expect (seed 002 normalizes
# with them on the GPU, inside the model).
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_ASPECT_RANGE = (3 / 4, 4 / 3)  # train crops: the Inception/ResNet range
_MAX_ATTEMPTS = 10  # sample_distorted_bounding_box tries; then it falls back to the whole image
# libjpeg decodes at 1/2, 1/4 or 1/8 scale in its IDCT, far cheaper than decoding full size and
# resizing; a scale is used only while the crop stays at least the output size (no upsampling).
JPEG_RATIOS = (8, 4, 2, 1)

Window = Callable[[tf.Tensor], tf.Tensor]  # [height, width, ...] -> [y, x, rows, columns], int32


def decode_rgb(contents: tf.Tensor) -> tf.Tensor:
    """Decodes a JPEG, PNG, GIF (first frame) or BMP to uint8 [rows, columns, 3].

    Grayscale is repeated to three channels, alpha dropped, CMYK JPEG converted, 16-bit
    PNG scaled to 8 bits.
    """
    image = tf.io.decode_image(contents, channels=CHANNELS, expand_animations=False, dtype=tf.uint8)
    return tf.ensure_shape(image, [None, None, CHANNELS])


def random_window(shape: tf.Tensor, min_area: float) -> tf.Tensor:
    """A random crop [y, x, rows, columns] covering min_area..1 of the image, aspect 3/4..4/3.

    `shape` is [rows, columns, channels] (tf.shape of an image, or tf.io.extract_jpeg_shape).
    """
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        tf.cast(shape, tf.int32),
        bounding_boxes=tf.constant([[[0.0, 0.0, 1.0, 1.0]]]), min_object_covered=min_area,
        aspect_ratio_range=_ASPECT_RANGE, area_range=(min_area, 1.0), max_attempts=_MAX_ATTEMPTS,
        use_image_if_no_bounding_boxes=True)
    return tf.gather(tf.concat([begin, size], 0), [0, 1, 3, 4])  # [y, x, rows, columns] in 2 ops (stack: 5)


def center_window(shape: tf.Tensor, height: int, width: int, fraction: float) -> tf.Tensor:
    """The central crop [y, x, rows, columns]: `fraction` of each side of the largest region with
    the output's aspect ratio (height:width), so resizing it does not stretch the image."""
    rows, columns = tf.cast(shape[0], tf.float32), tf.cast(shape[1], tf.float32)
    scale = fraction * tf.minimum(rows / height, columns / width)
    crop_rows = tf.clip_by_value(tf.cast(tf.round(height * scale), tf.int32), 1, tf.cast(shape[0], tf.int32))
    crop_columns = tf.clip_by_value(tf.cast(tf.round(width * scale), tf.int32), 1, tf.cast(shape[1], tf.int32))
    y = (tf.cast(shape[0], tf.int32) - crop_rows) // 2
    x = (tf.cast(shape[1], tf.int32) - crop_columns) // 2
    return tf.stack([y, x, crop_rows, crop_columns])


def crop(image: tf.Tensor, window: tf.Tensor) -> tf.Tensor:
    """image[y:y+rows, x:x+columns] for a window [y, x, rows, columns]."""
    return tf.slice(image, [window[0], window[1], 0], [window[2], window[3], -1])


def image_shape(contents: tf.Tensor) -> tf.Tensor:
    """[rows, columns, 3] of an encoded JPEG or PNG from its header, without decoding it."""
    png = tf.io.decode_raw(tf.strings.substr(contents, 16, 8), tf.int32, little_endian=False)  # IHDR: width, height
    return tf.cond(tf.io.is_jpeg(contents), lambda: tf.io.extract_jpeg_shape(contents),
                   lambda: tf.stack([png[1], png[0], CHANNELS]))


def decode_and_crop(contents: tf.Tensor, window_fn: Window, min_size: tuple[int, int] = (1, 1), *,
                    shape: Optional[tf.Tensor] = None, scaled: bool = True, dct_method: str = "",
                    fancy_upscaling: bool = True, ratios: Sequence[int] = JPEG_RATIOS,
                    formats: Sequence[str] = ("JPEG", "PNG")) -> tf.Tensor:
    """Decodes only the window of an encoded JPEG or PNG: uint8 [rows, columns, 3].

    JPEG: `tf.io.decode_and_crop_jpeg` decodes just the window's blocks, at 1/2, 1/4 or
    1/8 scale when the window is still at least `min_size` there (`scaled`). PNG is decoded
    whole, then cropped. The window is drawn once, from the image's size: `shape` (e.g. what
    the up-front scan read) or the file's header.

    Args:
      contents: the encoded file, a scalar string.
      window_fn: image shape [rows, columns, channels] -> window [y, x, rows, columns].
      min_size: (rows, columns) the caller resizes to; a scaled decode never goes below it.
      shape: [rows, columns, ...] of the image, if known (saves reading it from the header).
      scaled: allow the reduced-scale decode.
      dct_method: JPEG inverse DCT ("" = TensorFlow's default, "INTEGER_FAST", "INTEGER_ACCURATE").
      fancy_upscaling: JPEG chroma upsampling by interpolation (TensorFlow's default).
      ratios: the decode scales that can occur (what the scan found the images' sizes allow);
        with one scale and one format there is no per-image branch at all.
      formats: the formats that can occur ("JPEG", "PNG").
    """
    window = window_fn(image_shape(contents) if shape is None else shape)
    ratios = tuple(r for r in JPEG_RATIOS if r in ratios) if scaled else (1,)
    jpeg = dict(channels=CHANNELS, dct_method=dct_method, fancy_upscaling=fancy_upscaling)
    if "PNG" not in formats and ratios == (1,):
        return tf.io.decode_and_crop_jpeg(contents, window, **jpeg)  # [rows, columns, 3] by its own shape function
    if "JPEG" not in formats:
        return tf.ensure_shape(crop(tf.io.decode_png(contents, channels=CHANNELS), window), [None, None, CHANNELS])
    # The largest ratio at which the window still covers min_size, and the window at that scale,
    # computed once: every op inside a branch is visited on every image, taken or not (~5 µs an op).
    ratio_tensor = tf.constant(ratios, tf.int32)
    fits = tf.logical_and(window[2] // ratio_tensor >= min_size[0], window[3] // ratio_tensor >= min_size[1])
    index = tf.argmax(tf.cast(fits, tf.int32), output_type=tf.int32)  # ratios run large to small; 1 always fits
    ratio = ratio_tensor[index]
    scaled_window = tf.concat([window[:2] // ratio, tf.maximum(window[2:] // ratio, 1)], 0)
    branch = tf.where(tf.io.is_jpeg(contents), 1 + index, 0)
    # One flat switch of one-op branches (decode_png, not decode_image, whose nested conds made
    # every image pay for a function call).
    branches = [lambda: crop(tf.io.decode_png(contents, channels=CHANNELS), window)]
    branches += [functools.partial(tf.io.decode_and_crop_jpeg, contents, scaled_window, ratio=r, **jpeg) for r in ratios]
    return tf.ensure_shape(tf.switch_case(branch, branches), [None, None, CHANNELS])


def usable_ratios(shapes: Sequence[Sequence[int]], config: ImageConfig, train: bool) -> tuple[int, ...]:
    """The JPEG decode scales worth a per-image branch for images of these [rows, columns, 3] shapes.

    A scale r decodes a crop window r times smaller and is taken when that still covers the output
    size. Any scale gives a correct image (1 always does), so this only decides which scales are
    worth the branch that picks one (a function call per image): those that an eval crop (fixed per
    image) reaches, or that a train crop of half the image's area reaches for some image. Tiny
    images get (1,): no branch at all.
    """
    if not config.scaled_decode:
        return (1,)
    share = math.sqrt(0.5) if train else config.eval_crop
    found = {1}
    for rows, columns, _ in shapes:
        reach = min(rows / config.height, columns / config.width) * share  # that window's side, in outputs
        found.update(r for r in JPEG_RATIOS if reach >= r)
    return tuple(r for r in JPEG_RATIOS if r in found)


def random_flip(image: tf.Tensor) -> tf.Tensor:
    """Flips left-right with probability 1/2.

    One ReverseV2 whose axis list is [1] or empty (range(1 + coin, 2)), not
    tf.image.random_flip_left_right's cond: no branch, so no function call per image.
    """
    return tf.reverse(image, tf.range(1 + tf.random.uniform([], 0, 2, tf.int32), 2))


def resize(image: tf.Tensor, height: int, width: int) -> tf.Tensor:
    """Bilinear resize to uint8 [height, width, 3], rounded (as Keras' image loader resizes).

    Bilinear weights are convex, so the result stays within 0..255: no clip is needed.
    """
    resized = tf.image.resize(image, [height, width], method="bilinear")
    return tf.cast(tf.round(resized), tf.uint8)


def train_window(config: ImageConfig) -> Window:
    return lambda shape: random_window(shape, config.min_crop_area)


def eval_window(config: ImageConfig) -> Window:
    return lambda shape: center_window(shape, config.height, config.width, config.eval_crop)


def preprocess(contents: tf.Tensor, config: ImageConfig, train: bool, shape: Optional[tf.Tensor] = None, *,
               ratios: Sequence[int] = JPEG_RATIOS, formats: Sequence[str] = ("JPEG", "PNG")) -> tf.Tensor:
    """An encoded image -> [height, width, 3] in config's dtype: train = random crop (decoded alone),
    flip, resize; eval = center crop, resize. `shape`: the image's [rows, columns, 3], if known;
    `ratios`, `formats`: what can occur (decode_and_crop), where the up-front scan knows it."""
    window = train_window(config) if train else eval_window(config)
    image = decode_and_crop(contents, window, (config.height, config.width), shape=shape,
                            scaled=config.scaled_decode, dct_method=config.dct_method,
                            fancy_upscaling=config.fancy_upscaling, ratios=ratios, formats=formats)
    return _finish(image, config, train)


def preprocess_decoded(image: tf.Tensor, config: ImageConfig, train: bool) -> tf.Tensor:
    """The same crop/flip/resize for an already decoded uint8 image (stored raw in shards)."""
    window = train_window(config) if train else eval_window(config)
    return _finish(crop(image, window(tf.shape(image))), config, train)


def _finish(image: tf.Tensor, config: ImageConfig, train: bool) -> tf.Tensor:
    """A crop -> resized, maybe flipped, in config's dtype, all on this one image.

    The dtype is made here, per image, while the image is in the core's cache: the same cast or
    scale on a whole batch afterwards streams every batch through memory once more (a float
    batch of 64 224 x 224 images is 38 MB: Dequantize of such a batch cost 164 µs an image on one
    core, measured, where the per-image scale is a few µs).
    """
    resized = tf.image.resize(image, [config.height, config.width], method="bilinear")  # float32, 0..255
    if train and config.flip:
        resized = random_flip(resized)
    if config.dtype == "uint8":
        return tf.cast(tf.round(resized), tf.uint8)
    return _normalized(resized) if config.normalize else resized * (1.0 / 255.0)


def to_dtype(images: tf.Tensor, dtype: str, normalized: bool = False) -> tf.Tensor:
    """uint8 images (one or a batch) as ImageConfig.dtype: float32 in [0, 1] (or `normalized`), or bytes.

    One pass over the images either way (a batch of 64 224 x 224 images is 38 MB of float32):
    Dequantize scales uint8 to [0, 1] in one op, where a cast and a multiply would write the
    floats twice; normalizing scales and shifts whole rows of pixels, not one broadcast per
    channel (Eigen's per-channel broadcast was ~20x slower, measured).
    """
    if dtype == "uint8":
        return images
    if normalized:
        return _normalized(images)
    return tf.raw_ops.Dequantize(input=tf.bitcast(images, tf.quint8), min_range=0.0, max_range=1.0,
                                 mode="MIN_COMBINED")


def _normalized(images: tf.Tensor) -> tf.Tensor:
    """normalize(images) for [..., height, width, 3] of 0..255 values (uint8 or float) of static size:
    one multiply-add per row."""
    inner = images.shape[-3:]
    if images.shape.rank is None or images.shape.rank < 3 or not inner.is_fully_defined():
        return normalize(images)
    pixels = inner.num_elements() // CHANNELS
    mean, std = np.asarray(IMAGENET_MEAN, np.float32), np.asarray(IMAGENET_STD, np.float32)
    scale, shift = np.tile(1.0 / (255.0 * std), pixels), np.tile(-mean / std, pixels)
    rows = tf.cast(tf.reshape(images, [-1, inner.num_elements()]), tf.float32)
    return tf.reshape(rows * scale + shift, tf.shape(images))


def normalize(images: tf.Tensor) -> tf.Tensor:
    """(x - ImageNet mean) / std per channel, for uint8 (0..255) or float (0..1) images of any rank.

    For the model to call (on the accelerator), not the input pipeline.
    """
    # One scale and one shift per channel: x * (1 / std) - mean / std, with uint8's 1 / 255 folded in.
    mean, std = tf.constant(IMAGENET_MEAN), tf.constant(IMAGENET_STD)
    scale = (1.0 / 255.0 if images.dtype == tf.uint8 else 1.0) / std
    return tf.cast(images, tf.float32) * scale - mean / std
