"""model_fn: a small CNN on any domain's features, normalized inside the model, with metrics and exports.

Normalization happens here, in the model's graph, not in the input pipeline: the
input_fn of an Estimator runs on the host CPU, while the model_fn's ops are placed
on the accelerator when there is one ("normalize on the GPU"). The data's domain
turns its features into the model's input (`Domain.model_input`): for log-mel, each
clip is shifted and scaled to zero mean and unit variance over all its frames and mel
bands (`standardize`). That needs no statistics of the training set (nothing to compute
up front, ship with the SavedModel or keep in sync), behaves the same in train, eval and
predict and for a batch of one, and removes the recording level, which in log-mel is an
additive offset. Per-band standardization over time was rejected: it erases exactly the
steady spectral shape that tells a tone from a hiss. Batch normalization was rejected:
it would make predictions depend on moving averages that a short run has not settled yet.

Images are normalized the same way round: the pipeline hands over uint8 (or [0, 1]
float) RGB and the model subtracts the ImageNet mean and divides by its std per
channel (seed 002's normalize-on-the-GPU), the constants every pretrained model uses.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from estimator_demo import hooks
from tfpipe.core.registry import domain_of_config

_EPSILON = 1e-3  # keeps a silent (constant) clip finite after standardization
DEFAULT_FILTERS = (16, 32, 64)


def standardize(log_mel: tf.Tensor) -> tf.Tensor:
    """Per clip: zero mean, unit variance over frames and mel bands ([batch, frames, n_mels])."""
    mean, variance = tf.nn.moments(log_mel, axes=[1, 2], keepdims=True)
    return (log_mel - mean) * tf.math.rsqrt(variance + _EPSILON)


def classifier(num_classes: int, filters: tuple[int, ...] = DEFAULT_FILTERS) -> tf.keras.Sequential:
    """conv3x3-relu-maxpool blocks, a global max pool (where and at what pitch a sound
    happens does not matter), one hidden dense layer and the logits."""
    layers = tf.keras.layers
    blocks = []
    for i, n in enumerate(filters):
        blocks += [layers.Conv2D(n, 3, padding="same", activation="relu", name=f"conv{i + 1}"),
                   layers.MaxPool2D(2, name=f"pool{i + 1}")]
    return tf.keras.Sequential(blocks + [layers.GlobalMaxPool2D(name="global_pool"),
                                         layers.Dense(64, activation="relu", name="hidden"),
                                         layers.Dense(num_classes, name="logits")], name="cnn")


def model_fn(features: dict, labels: Optional[tf.Tensor], mode: str, params: dict):
    """The Estimator model_fn.

    Args:
      features: the data's domain features, e.g. {"log_mel": float32 [batch, frames, n_mels]},
        {"waveform": float32 [batch, samples]} (then the log-mel is computed here, on the
        accelerator), or {"image": uint8 or float32 [batch, height, width, 3]} (normalized here);
        the domain of `params["features"]` makes them the model's input (Domain.model_input).
      labels: int64 [batch] class ids (None in PREDICT).
      mode: a tf.estimator.ModeKeys value.
      params: "class_names" (sequence of str), "features" (the data's domain config),
        optional "learning_rate" (default 2e-3) and "filters" (conv widths).

    Returns:
      tf.estimator.EstimatorSpec: TRAIN with Adam; EVAL with accuracy (loss is added by the Estimator);
      PREDICT with class ids, class names and probabilities, exported as the
      serving signature.
    """
    class_names = tuple(params["class_names"])
    feature_config = params["features"]
    x = domain_of_config(feature_config).model_input(features, feature_config)  # float32 [batch, h, w, c]
    cnn = classifier(len(class_names), tuple(params.get("filters", DEFAULT_FILTERS)))
    logits = cnn(x, training=mode == tf.estimator.ModeKeys.TRAIN)
    class_ids = tf.argmax(logits, axis=-1)
    predictions = {
        "class_ids": class_ids,
        "class_names": tf.gather(tf.constant(class_names), class_ids),
        "probabilities": tf.nn.softmax(logits),
    }
    if mode == tf.estimator.ModeKeys.PREDICT:
        export = tf.estimator.export.PredictOutput(predictions)
        return tf.estimator.EstimatorSpec(mode, predictions=predictions,
                                          export_outputs={"serving_default": export, "predict": export})

    # v1 losses: under MirroredStrategy the v1 optimizer then scales gradients per replica correctly.
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    accuracy = tf.compat.v1.metrics.accuracy(labels, class_ids, name="accuracy")
    if mode == tf.estimator.ModeKeys.EVAL:
        hooks.publish_eval_accuracy(accuracy[0])
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": accuracy})

    tf.compat.v1.summary.scalar("train_accuracy",
                                tf.reduce_mean(tf.cast(tf.equal(class_ids, labels), tf.float32)))
    shown = x if x.shape[-1] in (1, 3, 4) else x[..., :1]  # what the model sees (rescaled to show)
    tf.compat.v1.summary.image("input", shown, max_outputs=2)
    optimizer = tf.compat.v1.train.AdamOptimizer(params.get("learning_rate", 2e-3))
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_or_create_global_step(),
                                  var_list=cnn.trainable_variables)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
