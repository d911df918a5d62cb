"""Estimator glue: make_input_fn for train/evaluate, serving_input_receiver_fn for export.

Nothing here imports tf.estimator, so Keras users of tfpipe never load it.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import tensorflow as tf

from tfpipe import audio
from tfpipe.config import FeatureConfig, PipelineConfig
from tfpipe.pipeline import Data, build_dataset, normalize_mode


def make_input_fn(data: Data, mode: str = "train", pipeline: Optional[PipelineConfig] = None,
                  features: Optional[FeatureConfig] = None) -> Callable[..., tf.data.Dataset]:
    """Returns `input_fn(params=None, input_context=None)` for Estimator.train/evaluate.

    The Estimator calls it in its own graph on the host; with a distribution
    strategy it passes an InputContext and each input pipeline reads its own files.
    `params["batch_size"]`, when the Estimator sets it, overrides the batch size.

    Args:
      data: wav folder, CSV manifest, shard folder or Source (see build_dataset).
      mode: "train" | "eval" | "predict" or a tf.estimator.ModeKeys value.
      pipeline: PipelineConfig (default optimized()).
      features: FeatureConfig (default FeatureConfig()).
    """
    mode = normalize_mode(mode)
    pipeline = pipeline or PipelineConfig.optimized()

    def input_fn(params: Optional[dict] = None,
                 input_context: Optional[tf.distribute.InputContext] = None) -> tf.data.Dataset:
        config = pipeline
        if params and params.get("batch_size"):
            config = dataclasses.replace(config, batch_size=int(params["batch_size"]))
        return build_dataset(data, mode, config, features, input_context, allow_device_prefetch=False)

    return input_fn
