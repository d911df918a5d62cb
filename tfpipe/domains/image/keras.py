"""The recipe a Keras user writes instead of tfpipe: image_dataset_from_directory + augmentation + prefetch.

It is here to be measured against (`tfpipe bench`'s keras variant), written the way the
Keras guides write it, with tfpipe's augmentation so the two produce the same kind of
batches: Keras decodes every file whole and resizes it to a load size (its
`image_size`), then the map crops, flips and resizes that. tfpipe's chain instead
decodes only the crop of a JPEG, at a reduced scale where possible, and batches bytes.
"""

from __future__ import annotations

import os
from typing import Optional

import tensorflow as tf

from tfpipe.domains.image import ops
from tfpipe.domains.image.config import ImageConfig


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
