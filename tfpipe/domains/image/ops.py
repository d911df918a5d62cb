"""Pure image ops: decode (JPEG: only the crop), crop windows, flip, resize, dtype, normalize.

Every op is a small TensorFlow function of one example (`to_dtype` and `normalize`
also of a batch), run by the online pipeline, by stored-shard stages and by the
serving signature alike, so the three agree exactly. Images are uint8 RGB until
`to_dtype`: the pipeline copies and batches bytes, not floats.
"""

from __future__ import annotations

from typing import Callable

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
_JPEG_RATIOS = (8, 4, 2, 1)

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
    return tf.stack([begin[0], begin[1], size[0], size[1]])


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


def decode_and_crop(contents: tf.Tensor, window_fn: Window, min_size: tuple[int, int] = (1, 1)) -> tf.Tensor:
    """Decodes only the window of an encoded image: uint8 [rows, columns, 3].

    JPEG: `tf.io.decode_and_crop_jpeg` decodes just the window's blocks, at 1/2, 1/4 or
    1/8 scale when the window is still at least `min_size` there. Other formats
    (PNG) are decoded whole, then cropped. The window is chosen from the image's size,
    which a JPEG gives from its header (`tf.io.extract_jpeg_shape`) without decoding.

    Args:
      contents: the encoded file, a scalar string.
      window_fn: image shape [rows, columns, channels] -> window [y, x, rows, columns].
      min_size: (rows, columns) the caller resizes to; a scaled decode never goes below it.
    """
    # One flat switch, not a switch nested in a cond: TensorFlow inlines top-level control flow
    # into the map function, while nested branches each ran as a function call (~0.25 ms an image).
    is_jpeg = tf.io.is_jpeg(contents)
    shape = tf.cond(is_jpeg, lambda: tf.io.extract_jpeg_shape(contents), lambda: tf.constant([1, 1, CHANNELS]))
    window = window_fn(shape)
    fits = [tf.logical_and(window[2] // r >= min_size[0], window[3] // r >= min_size[1])
            for r in _JPEG_RATIOS[:-1]] + [tf.constant(True)]
    largest_fit = tf.argmax(tf.cast(tf.stack(fits), tf.int32), output_type=tf.int32)  # ratios run large to small
    branch = tf.where(is_jpeg, 1 + largest_fit, 0)

    def other():
        image = decode_rgb(contents)
        return crop(image, window_fn(tf.shape(image)))

    image = tf.switch_case(branch, [other] + [_scaled_jpeg_crop(contents, window, r) for r in _JPEG_RATIOS])
    return tf.ensure_shape(image, [None, None, CHANNELS])


def _scaled_jpeg_crop(contents: tf.Tensor, window: tf.Tensor, ratio: int) -> Callable[[], tf.Tensor]:
    """A branch decoding `window` at 1/ratio scale (the window in scaled coordinates)."""

    def branch():
        scaled = tf.stack([window[0] // ratio, window[1] // ratio,
                           tf.maximum(window[2] // ratio, 1), tf.maximum(window[3] // ratio, 1)])
        return tf.io.decode_and_crop_jpeg(contents, scaled, channels=CHANNELS, ratio=ratio)

    return branch


def random_flip(image: tf.Tensor) -> tf.Tensor:
    """Flips left-right with probability 1/2."""
    return tf.image.random_flip_left_right(image)


def resize(image: tf.Tensor, height: int, width: int) -> tf.Tensor:
    """Bilinear resize to uint8 [height, width, 3] (rounded, as Keras' image loader resizes)."""
    resized = tf.image.resize(image, [height, width], method="bilinear")
    return tf.cast(tf.clip_by_value(tf.round(resized), 0.0, 255.0), tf.uint8)


def train_window(config: ImageConfig) -> Window:
    return lambda shape: random_window(shape, config.min_crop_area)


def eval_window(config: ImageConfig) -> Window:
    return lambda shape: center_window(shape, config.height, config.width, config.eval_crop)


def preprocess(contents: tf.Tensor, config: ImageConfig, train: bool) -> tf.Tensor:
    """An encoded image -> uint8 [height, width, 3]: train = random crop (decoded alone), flip,
    resize; eval = center crop, resize."""
    window = train_window(config) if train else eval_window(config)
    image = resize(decode_and_crop(contents, window, (config.height, config.width)), config.height, config.width)
    return random_flip(image) if train and config.flip else image


def preprocess_decoded(image: tf.Tensor, config: ImageConfig, train: bool) -> tf.Tensor:
    """The same crop/flip/resize for an already decoded uint8 image (stored raw in shards)."""
    window = train_window(config) if train else eval_window(config)
    image = resize(crop(image, window(tf.shape(image))), config.height, config.width)
    return random_flip(image) if train and config.flip else image


def to_dtype(images: tf.Tensor, dtype: str) -> tf.Tensor:
    """uint8 images (one or a batch) as ImageConfig.dtype: float32 in [0, 1], or left as bytes."""
    if dtype == "uint8":
        return images
    return tf.cast(images, tf.float32) * (1.0 / 255.0)


def normalize(images: tf.Tensor) -> tf.Tensor:
    """(x - ImageNet mean) / std per channel, for uint8 (0..255) or float (0..1) images of any rank.

    For the model to call (on the accelerator), not the input pipeline.
    """
    x = tf.cast(images, tf.float32)
    if images.dtype == tf.uint8:
        x = x * (1.0 / 255.0)
    return (x - tf.constant(IMAGENET_MEAN)) / tf.constant(IMAGENET_STD)
