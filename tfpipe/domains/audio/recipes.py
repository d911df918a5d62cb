"""The audio domain's reference recipes: what its users write instead of tfpipe, timed beside it.

`keras_recipe`, what a Keras user writes: audio_dataset_from_directory + log-mel map + prefetch.
It is here to be measured against (`tfpipe bench`'s keras variant), written the way the
Keras guides write it, with tfpipe's own log-mel function so the two produce the same
features: Keras reads and decodes whole batches of wavs in its loader, then one parallel
map computes the features. Same signature as the image domain's recipes
(`tfpipe.domains.image.recipes`), so the bench finds each one by the domain's package.
"""

from __future__ import annotations

import os
from typing import Optional

import tensorflow as tf

from tfpipe.domains.audio import ops
from tfpipe.domains.audio.config import AudioConfig


def keras_recipe(data_dir: str, config: Optional[AudioConfig] = None, batch_size: int = 64,
                 seed: Optional[int] = None, *, mode: str = "train",
                 epochs: Optional[int] = None) -> tf.data.Dataset:
    """`tf.keras.utils.audio_dataset_from_directory` with the same log-mel map, prefetched.

    Args:
      data_dir: a wav folder with one subfolder per class.
      config: features to compute (default AudioConfig()); clips are cut or padded to
        `config.num_samples`.
      batch_size: examples per batch (the last batch of an epoch may be smaller, as Keras makes it).
      seed: shuffle seed (None: a new order every run).
      mode: "train" (shuffled, a fresh pass per epoch, endless unless `epochs`) or "eval"
        (ordered, one pass).
      epochs: train: stop after this many passes.

    Returns:
      A dataset of ({config.feature_key: [batch, ...]}, int64 labels [batch]).

    Raises:
      ValueError: `data_dir` is not a folder.
    """
    config = config or AudioConfig()
    train = mode == "train"
    if not os.path.isdir(data_dir):
        raise ValueError(f"{data_dir}: not a folder; keras_recipe reads a wav folder with one subfolder per class")
    ds = tf.keras.utils.audio_dataset_from_directory(
        data_dir, batch_size=batch_size, output_sequence_length=config.num_samples, shuffle=train, seed=seed)

    def features(wav, label):
        return {config.feature_key: ops.compute_features(tf.squeeze(wav, -1), config)}, tf.cast(label, tf.int64)

    ds = ds.map(features, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.prefetch(tf.data.AUTOTUNE)
    return ds.repeat(epochs) if train else ds  # a fresh (reshuffled) pass per epoch, as Keras fit iterates
