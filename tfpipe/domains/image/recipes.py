"""The image domain's reference recipes: what its users write instead of tfpipe, timed beside it.

`keras_recipe`, what a Keras user writes: image_dataset_from_directory + augmentation + prefetch,
written the way the Keras guides write it (`tfpipe bench`'s keras variant), with tfpipe's
augmentation so the two produce the same kind of batches: Keras decodes every file whole and
resizes it to a load size (its `image_size`), then the map crops, flips and resizes that.
tfpipe's chain instead decodes only the crop of a JPEG, at a reduced scale where possible, and
batches bytes.

`tf_models_recipe`, what an expert writes by hand: tensorflow/models' ResNet ImageNet
preprocessing over a folder (`tfpipe bench`'s tf-models variant), written the way users of
tensorflow/models write it (official/legacy/image_classification/resnet/
imagenet_preprocessing.py): list the files, shuffle, repeat, one map(AUTOTUNE) that reads a
file, draws `sample_distorted_bounding_box` from the JPEG header, decodes only that crop
(`decode_and_crop_jpeg`), flips and resizes to float32, then batch and prefetch. Eval:
decode the whole image, resize its shorter side, center crop. Same signature as
`keras_recipe`, and the same output (config's size, dtype and normalization), so the two and
tfpipe's chain are compared at equal output. Like the recipe, it reads JPEG files only.
"""

from __future__ import annotations

import math
import os
from typing import Optional

import tensorflow as tf

from tfpipe.domains.image import ops
from tfpipe.domains.image.config import CHANNELS, ImageConfig

_JPEG_EXTENSIONS = (".jpg", ".jpeg")
_AREA_RANGE = (0.08, 1.0)  # the Inception/ResNet crop distribution
_ASPECT_RANGE = (3 / 4, 4 / 3)
_MIN_OBJECT_COVERED = 0.1  # as imagenet_preprocessing.py
_MAX_ATTEMPTS = 100


def keras_recipe(data_dir: str, config: Optional[ImageConfig] = None, batch_size: int = 64,
                 seed: Optional[int] = None, *, mode: str = "train",
                 epochs: Optional[int] = None) -> tf.data.Dataset:
    """`tf.keras.utils.image_dataset_from_directory` with the same crops and flips, prefetched.

    Args:
      data_dir: a folder with one subfolder per class.
      config: output size, dtype and augmentation (default ImageConfig()); images load at
        `config.stored_size` (the eval crop's need, as a Keras user picks a load size), then are
        cropped to (height, width).
      batch_size: examples per batch.
      seed: shuffle seed (None: a new order every run).
      mode: "train" (shuffled, random crop and flip, endless unless `epochs`) or "eval"
        (ordered, center crop, one pass).
      epochs: train: stop after this many passes.

    Returns:
      A dataset of ({"image": [batch, height, width, 3]}, int64 labels [batch]).
    """
    config = config or ImageConfig()
    train = mode == "train"
    if not os.path.isdir(data_dir):
        raise ValueError(f"{data_dir}: not a folder; keras_recipe reads a folder with one subfolder per class")
    # Unbatched, so each image gets its own crop, as in the Keras augmentation guides.
    ds = tf.keras.utils.image_dataset_from_directory(
        data_dir, labels="inferred", label_mode="int", color_mode="rgb", batch_size=None,
        image_size=config.stored_size, shuffle=train, seed=seed)
    window = ops.train_window(config) if train else ops.eval_window(config)

    def augment(image, label):
        image = tf.cast(tf.clip_by_value(tf.round(image), 0.0, 255.0), tf.uint8)  # Keras loads float 0..255
        image = ops.resize(ops.crop(image, window(tf.shape(image))), config.height, config.width)
        if train and config.flip:
            image = ops.random_flip(image)
        return image, tf.cast(label, tf.int64)

    if train:
        ds = ds.repeat(epochs)
    ds = ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.batch(batch_size, drop_remainder=train)
    ds = ds.map(lambda images, labels: ({config.feature_key: ops.to_dtype(images, config.dtype, config.normalize)},
                                        labels),
                num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


def tf_models_recipe(data_dir: str, config: Optional[ImageConfig] = None, batch_size: int = 64,
                     seed: Optional[int] = None, *, mode: str = "train",
                     epochs: Optional[int] = None) -> tf.data.Dataset:
    """tensorflow/models' ResNet input pipeline over a JPEG folder, with config's output.

    Args:
      data_dir: a folder with one subfolder of JPEG files per class.
      config: output size, dtype and normalization (default ImageConfig()); the crop
        distribution is the recipe's own (area 0.08-1, aspect 3/4-4/3), flip always.
      batch_size: examples per batch.
      seed: shuffle seed (None: a new order every run).
      mode: "train" (shuffled, random crop and flip, endless unless `epochs`) or "eval"
        (ordered, center crop of the resized image, one pass).
      epochs: train: stop after this many passes.

    Returns:
      A dataset of ({"image": [batch, height, width, 3]}, int64 labels [batch]).

    Raises:
      ValueError: `data_dir` is not a folder of class folders of JPEG files, naming what is not.
    """
    config = config or ImageConfig()
    train = mode == "train"
    paths, labels = _jpeg_folder(data_dir)
    ds = tf.data.Dataset.from_tensor_slices((paths, tf.constant(labels, tf.int64)))
    if train:
        ds = ds.shuffle(len(paths), seed=seed, reshuffle_each_iteration=True).repeat(epochs)

    def parse(path, label):
        image_buffer = tf.io.read_file(path)
        image = _preprocess_for_train(image_buffer, config) if train else _preprocess_for_eval(image_buffer, config)
        return {config.feature_key: _output(image, config)}, label

    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.batch(batch_size, drop_remainder=train)
    return ds.prefetch(tf.data.AUTOTUNE)


def _preprocess_for_train(image_buffer: tf.Tensor, config: ImageConfig) -> tf.Tensor:
    """_decode_crop_and_flip, then _resize_image: float32 [height, width, 3] in 0..255."""
    bbox = tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32, [1, 1, 4])  # no boxes: the whole image
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        tf.image.extract_jpeg_shape(image_buffer), bounding_boxes=bbox,
        min_object_covered=_MIN_OBJECT_COVERED, aspect_ratio_range=_ASPECT_RANGE, area_range=_AREA_RANGE,
        max_attempts=_MAX_ATTEMPTS, use_image_if_no_bounding_boxes=True)
    offset_y, offset_x, _ = tf.unstack(begin)
    target_height, target_width, _ = tf.unstack(size)
    crop_window = tf.stack([offset_y, offset_x, target_height, target_width])
    cropped = tf.image.decode_and_crop_jpeg(image_buffer, crop_window, channels=CHANNELS)
    cropped = tf.image.random_flip_left_right(cropped)
    return tf.compat.v1.image.resize(cropped, [config.height, config.width],
                                     method=tf.image.ResizeMethod.BILINEAR, align_corners=False)


def _preprocess_for_eval(image_buffer: tf.Tensor, config: ImageConfig) -> tf.Tensor:
    """decode, _aspect_preserving_resize (shorter side to the eval size), _central_crop."""
    image = tf.image.decode_jpeg(image_buffer, channels=CHANNELS)
    resize_min = math.ceil(max(config.height, config.width) / config.eval_crop)  # 256 for 224
    shape = tf.cast(tf.shape(image)[:2], tf.float32)
    scale = resize_min / tf.reduce_min(shape)
    new_size = tf.cast(tf.round(shape * scale), tf.int32)
    image = tf.compat.v1.image.resize(image, new_size, method=tf.image.ResizeMethod.BILINEAR, align_corners=False)
    top = (new_size[0] - config.height) // 2
    left = (new_size[1] - config.width) // 2
    return tf.slice(image, [top, left, 0], [config.height, config.width, -1])


def _output(image: tf.Tensor, config: ImageConfig) -> tf.Tensor:
    """The recipe's float image (0..255) as config asks, per example as the recipe does."""
    image.set_shape([config.height, config.width, CHANNELS])
    if config.dtype == "uint8":
        return tf.cast(tf.round(image), tf.uint8)
    if config.normalize:
        return ops.normalize(image * (1.0 / 255.0))
    return image * (1.0 / 255.0)


def _jpeg_folder(data_dir: str) -> tuple[list[str], list[int]]:
    """(paths, label ids) of a folder with one subfolder of JPEGs per class, classes sorted."""
    if not os.path.isdir(data_dir):
        raise ValueError(f"{data_dir}: not a folder; the tf-models recipe reads a folder with one subfolder "
                         f"of JPEG files per class")
    classes = sorted(d for d in os.listdir(data_dir) if os.path.isdir(os.path.join(data_dir, d)))
    paths, labels, other = [], [], []
    for label, name in enumerate(classes):
        for file in sorted(os.listdir(os.path.join(data_dir, name))):
            path = os.path.join(data_dir, name, file)
            if not file.lower().endswith(_JPEG_EXTENSIONS):
                other.append(path)
                continue
            paths.append(path)
            labels.append(label)
    if other or not paths:
        what = f"{len(other)} files are not JPEG, e.g. {other[0]}" if other else "no JPEG files"
        raise ValueError(f"{data_dir}: {what}; the tf-models recipe decodes JPEG only "
                         f"(tf.image.decode_and_crop_jpeg), as tensorflow/models' ImageNet input does")
    return paths, labels
