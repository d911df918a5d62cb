"""make_input_fn drives a real Estimator; tfpipe stays importable without tf.estimator."""

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tfpipe.config import PipelineConfig
from tfpipe.domains.audio.config import AudioConfig
from tfpipe.train.estimator import make_input_fn

FEAT = AudioConfig(clip_seconds=0.25)


def _model_fn(features, labels, mode, params):
    """Tiny linear classifier on time-averaged log-mel, enough to prove the wiring."""
    pooled = tf.reduce_mean(features["log_mel"], axis=1)
    logits = tf.keras.layers.Dense(params["classes"])(pooled)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"class": tf.argmax(logits, -1)})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.AdamOptimizer(0.05).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    accuracy = tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, -1))
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops={"accuracy": accuracy})


@pytest.fixture
def estimator(tmp_path):
    config = tf.estimator.RunConfig(model_dir=str(tmp_path / "model"), save_checkpoints_steps=5,
                                    log_step_count_steps=1000)
    return tf.estimator.Estimator(_model_fn, config=config, params={"classes": 3})


def test_estimator_trains_and_evaluates_from_make_input_fn(corpus, estimator):
    pipe = PipelineConfig.optimized(batch_size=4, seed=1)
    estimator.train(make_input_fn(corpus, tf.estimator.ModeKeys.TRAIN, pipe, FEAT), max_steps=6)
    assert estimator.get_variable_value("global_step") == 6
    metrics = estimator.evaluate(make_input_fn(corpus, tf.estimator.ModeKeys.EVAL, pipe, FEAT))
    assert metrics["global_step"] == 6 and 0.0 <= metrics["accuracy"] <= 1.0
    predictions = list(estimator.predict(make_input_fn(corpus, tf.estimator.ModeKeys.PREDICT, pipe, FEAT)))
    assert len(predictions) == 12  # every file once, last partial batch kept


def test_train_and_evaluate_completes_with_naive_and_optimized(corpus, estimator):
    for steps, pipe in ((4, PipelineConfig.naive(batch_size=4)), (8, PipelineConfig.optimized(batch_size=4))):
        train_spec = tf.estimator.TrainSpec(make_input_fn(corpus, "train", pipe, FEAT), max_steps=steps)
        eval_spec = tf.estimator.EvalSpec(make_input_fn(corpus, "eval", pipe, FEAT), steps=None, throttle_secs=0)
        metrics, _ = tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
        assert metrics["global_step"] == steps and np.isfinite(metrics["loss"])


def test_input_fn_takes_estimator_params_and_input_context(corpus):
    input_fn = make_input_fn(corpus, "eval", PipelineConfig.optimized(batch_size=5), FEAT)
    assert [len(l) for _, l in input_fn().as_numpy_iterator()] == [5, 5, 2]
    assert [len(l) for _, l in input_fn(params={"batch_size": 6}).as_numpy_iterator()] == [6, 6]
    ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1)
    assert sum(len(l) for _, l in input_fn(input_context=ctx).as_numpy_iterator()) == 6


def test_import_tfpipe_does_not_load_the_estimator():
    code = ("import sys, tfpipe; tfpipe.build_dataset; tfpipe.make_input_fn; tfpipe.PipelineConfig; "
            "print(any(m.startswith('tensorflow_estimator') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_cli_help_lists_subcommands_and_is_quiet():
    out = subprocess.run([sys.executable, "-m", "tfpipe.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for command in ("synth", "prepare", "inspect", "bench", "serve"):
        assert f"  {command} " in out.stdout
    assert "tensorflow/core" not in out.stderr


def test_train_and_eval_data_of_different_classes_warn_once_and_class_names_pins_them(tmp_path, caplog):
    # Issue 32/33 #6: an eval folder lacking a class numbers the rest differently (cat 2 in train, 1 in eval).
    import logging
    import types

    from tests.support import make_corpus

    train = make_corpus(tmp_path / "train", classes=("ant", "bee", "cat"), per_class=1)
    held = make_corpus(tmp_path / "eval", classes=("ant", "cat"), per_class=1)
    config = types.SimpleNamespace(model_dir=str(tmp_path / "model"))
    pipe = PipelineConfig.naive(batch_size=4)
    with caplog.at_level(logging.WARNING, logger="tfpipe"):
        make_input_fn(train, "train", pipe, FEAT)(config=config)
        for _ in range(2):  # every train_and_evaluate round calls it: said once
            make_input_fn(held, "eval", pipe, FEAT)(config=config)
    warned = [r.getMessage() for r in caplog.records if "classes" in r.getMessage()]
    assert len(warned) == 1 and ("eval data has classes ['ant', 'cat'] but train data ['ant', 'bee', 'cat']: the same "
                                 "class gets different ids; pass class_names=") in warned[0]
    caplog.clear()
    pinned = make_input_fn(held, "eval", pipe, FEAT, class_names=("ant", "bee", "cat"))(config=config)
    (_, labels), = pinned.as_numpy_iterator()
    assert sorted(labels.tolist()) == [0, 2] and not caplog.records
