"""Estimator glue: make_input_fn for train/evaluate, serving_input_receiver_fn for export.

Nothing here imports tf.estimator until a receiver is built, so Keras users never load it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import tensorflow as tf

from tfpipe.config import PipelineConfig
from tfpipe.core.chain import build_dataset, normalize_mode
from tfpipe.core.source import Data, get_domain


def make_input_fn(data: Data, mode: str = "train", pipeline: Optional[PipelineConfig] = None,
                  features: Any = None, **kwargs: Any) -> Callable[..., tf.data.Dataset]:
    """Returns `input_fn(params=None, input_context=None)` for Estimator.train/evaluate.

    The Estimator calls it in its own graph on the host; with a distribution strategy
    it passes an InputContext and each input pipeline reads its own files.
    `params["batch_size"]`, when the Estimator sets it, overrides the batch size.

    Args:
      data: anything build_dataset takes: a folder, CSV, glob, shard folder, `(paths, labels)`.
      mode: "train" | "eval" | "predict" or a tf.estimator.ModeKeys value.
      pipeline: PipelineConfig (default optimized()).
      features: the domain's config (default: the domain's, or a shard folder's own).
      **kwargs: build_dataset's keyword arguments: read=, process=, batch_process=, feature_key=.
    """
    mode = normalize_mode(mode)
    pipeline = pipeline or PipelineConfig.optimized()

    def input_fn(params: Optional[dict] = None,
                 input_context: Optional[tf.distribute.InputContext] = None) -> tf.data.Dataset:
        config = pipeline
        if params and params.get("batch_size"):
            config = dataclasses.replace(config, batch_size=int(params["batch_size"]))
        return build_dataset(data, mode, config, features, input_context, allow_device_prefetch=False, **kwargs)

    return input_fn


def serving_input_receiver_fn(features: Any = None, *, domain: Optional[str] = None,
                              fixed_length: bool = False) -> Callable[[], Any]:
    """Returns a `serving_input_receiver_fn` for export: raw inputs in, the training features out.

    The domain builds the signature (audio: `{"waveform": float32 [batch, samples]}`, mono
    samples in [-1, 1) at the config's sample rate, cropped or zero-padded like training;
    images: encoded image bytes), with the same ops the input pipeline runs, so the served
    model sees exactly what it was trained on.

    Args:
      features: the config the model was trained with (default: the domain's default).
      domain: "audio" or "image"; default: the domain whose config `features` is (audio).
      fixed_length: audio only: the signature then requires exactly `num_samples` per row.

    Returns:
      A zero-argument function for `Estimator.export_saved_model` or
      `tf.estimator.FinalExporter`, returning a `tf.estimator.export.ServingInputReceiver`.
    """
    from tfpipe.core.source import domains

    if domain is None:
        domain = next((d.name for d in domains().values() if isinstance(features, d.config_class)), "audio")
    plugin = get_domain(domain)
    config = plugin.config(features)

    def receiver_fn():
        receivers, outputs = plugin.serving_receiver(config)
        if fixed_length and "waveform" in receivers:
            receivers["waveform"].set_shape([None, config.num_samples])
        return tf.estimator.export.ServingInputReceiver(outputs, receivers)  # tf.estimator loads here

    return receiver_fn
