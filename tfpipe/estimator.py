"""Estimator glue: make_input_fn for train/evaluate, serving_input_receiver_fn for export.

Nothing here imports tf.estimator, so Keras users of tfpipe never load it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

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
      features: FeatureConfig (default: a shard folder's own, else FeatureConfig()).
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


def serving_input_receiver_fn(features: Optional[FeatureConfig] = None, *,
                              fixed_length: bool = False) -> Callable[[], Any]:
    """Returns a `serving_input_receiver_fn` for export: raw waveforms in, the training features out.

    The exported signature takes `{"waveform": float32 [batch, samples]}`: mono
    samples in [-1, 1) at `features.sample_rate` (what soundfile or
    tf.audio.decode_wav give). Each row is cropped or zero-padded to
    `features.num_samples` (`tfpipe.audio.fix_length`) and turned into features by
    `tfpipe.audio.compute_features`, the code the input pipeline runs, so the served
    model sees exactly what it was trained on. A "librosa" FeatureConfig is served
    with the "tf" backend: a SavedModel cannot carry Python code, and the two
    backends compute the same log-mel.

    Args:
      features: the FeatureConfig the model was trained with (default FeatureConfig()).
      fixed_length: the signature then requires exactly `num_samples` per row
        (otherwise any length is accepted).

    Returns:
      A zero-argument function for `Estimator.export_saved_model` or
      `tf.estimator.FinalExporter`, returning a `tf.estimator.export.ServingInputReceiver`.
    """
    features = features or FeatureConfig()
    in_graph = dataclasses.replace(features, backend="tf")

    def receiver_fn():
        length = features.num_samples if fixed_length else None
        waveform = tf.compat.v1.placeholder(tf.float32, [None, length], name="waveform")
        fixed = audio.fix_length(waveform, features.num_samples)
        return tf.estimator.export.ServingInputReceiver(  # tf.estimator loads here, on first use
            {features.feature_key: audio.compute_features(fixed, in_graph)}, {"waveform": waveform})

    return receiver_fn
