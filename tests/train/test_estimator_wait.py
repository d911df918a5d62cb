"""InputWaitHook on real Estimators: canned, own model_fn, MirroredStrategy; its share checked against caching."""

import glob
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from tests.support import make_corpus
from tfpipe.config import PipelineConfig
from tfpipe.domains.audio.config import AudioConfig
from tfpipe.train.estimator import InputWaitHook, make_input_fn
from tfpipe.train.wait import WaitStats, verdict

BATCH = 8


def _input_fn(sleep_s=0.0, prefetch=True):
    """An input_fn tfpipe did not build: in-memory rows, optionally `sleep_s` per batch in a numpy function."""
    def input_fn():
        x = np.random.default_rng(0).random((64, 4), np.float32)
        ds = tf.data.Dataset.from_tensor_slices(({"x": x}, (x[:, 0] > 0.5).astype(np.int64))).repeat().batch(BATCH)
        if sleep_s:
            ds = ds.map(lambda f, y: (tf.numpy_function(lambda v: time.sleep(sleep_s) or v, [f["x"]], tf.float32), y))
            ds = ds.map(lambda x, y: ({"x": tf.ensure_shape(x, [BATCH, 4])}, y))
        ds = ds.prefetch(1) if prefetch else ds
        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False  # exactly the prefetch asked for
        return ds.with_options(options)
    return input_fn


def _model_fn(features, labels, mode, params):
    """A linear model; with params["sleep_s"] each step also computes that long after its batch arrives."""
    x = features["x"] if "x" in features else tf.reduce_mean(features["log_mel"], axis=1)
    if params.get("sleep_s"):
        x = tf.numpy_function(lambda v: time.sleep(params["sleep_s"]) or v, [x], tf.float32)
        x = tf.ensure_shape(x, [None, 4])
    for width in params.get("hidden", ()):
        x = tf.keras.layers.Dense(width, activation="relu")(x)
    logits = tf.keras.layers.Dense(3)(x)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.AdamOptimizer(1e-3).minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


class _WallClock(tf.compat.v1.train.SessionRunHook):
    """The independent measure: when each step's session.run returned."""

    def __init__(self):
        self.times = []

    def after_run(self, run_context, run_values):
        self.times.append(time.perf_counter())

    def median_step(self, skip):
        return float(np.median(np.diff(self.times[skip:])))


def _config(tmp_path, name, **kwargs):
    return tf.estimator.RunConfig(model_dir=str(tmp_path / name), log_step_count_steps=None, **kwargs)


def _tensorboard_scalars(model_dir):
    tags = {}
    for path in glob.glob(os.path.join(model_dir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                tags.setdefault(value.tag, []).append(value.simple_value)
    return {tag: values for tag, values in tags.items() if tag.startswith("tfpipe/")}


def test_a_canned_estimator_reports_stats_log_lines_and_tensorboard_scalars(tmp_path):
    estimator = tf.estimator.DNNClassifier([8], [tf.feature_column.numeric_column("x", shape=[4])], n_classes=2,
                                           config=_config(tmp_path, "dnn", save_summary_steps=5))
    lines = []
    hook = InputWaitHook(every_n_steps=5, warmup_steps=2, report=lines.append)
    estimator.train(_input_fn(), steps=12, hooks=[hook])
    assert hook.stats.steps == 10 and hook.stats.examples == 10 * BATCH
    assert hook.stats.step_seconds > hook.stats.wait_seconds >= 0 and 0 <= hook.stats.input_wait_share < 1
    assert [line.split(":")[0] for line in lines[:2]] == ["step 7", "step 12"]  # the global step after the step
    assert " examples/s, input wait " in lines[0] and lines[-1].startswith("input wait over 10 steps, ")
    scalars = _tensorboard_scalars(estimator.model_dir)
    assert set(scalars) == {"tfpipe/input_wait_share", "tfpipe/examples_per_sec"}
    assert all(0 <= v <= 1 for v in scalars["tfpipe/input_wait_share"])
    assert all(v > 0 for v in scalars["tfpipe/examples_per_sec"])


def test_own_model_fn_on_make_input_fn_and_iterators_the_step_does_not_use_stay_untouched(corpus, tmp_path):
    def model_fn(features, labels, mode, params):
        # An iterator the train step never reads (never initialized): a hook that ran it would fail the step.
        spare = tf.compat.v1.data.make_initializable_iterator(tf.data.Dataset.range(3)).get_next()
        tf.compat.v1.add_to_collection("spare", spare)
        return _model_fn(features, labels, mode, params)

    estimator = tf.estimator.Estimator(model_fn, config=_config(tmp_path, "own"), params={})
    hook = InputWaitHook(every_n_steps=0, warmup_steps=2)
    pipe = PipelineConfig.optimized(batch_size=4, seed=0)
    estimator.train(make_input_fn(corpus, "train", pipe, AudioConfig(clip_seconds=0.25)), steps=8, hooks=[hook])
    assert hook.stats.steps == 6 and hook.stats.examples == 6 * 4
    estimator.train(make_input_fn(corpus, "train", pipe, AudioConfig(clip_seconds=0.25)), steps=5, hooks=[hook])
    assert hook.stats.steps == 6 + 3  # a second train call adds to the figures


def test_a_second_run_into_a_finished_model_dir_says_no_step_ran_and_a_folder_gets_its_bench_command(
        corpus, tmp_path):
    pipe = PipelineConfig.optimized(batch_size=4, seed=0)
    input_fn = make_input_fn(corpus, "train", pipe, AudioConfig(clip_seconds=0.25))
    estimator = tf.estimator.Estimator(_model_fn, config=_config(tmp_path, "twice"), params={})
    first, lines = InputWaitHook(every_n_steps=0, warmup_steps=1), []
    estimator.train(input_fn, max_steps=6, hooks=[first])
    assert first.stats.steps == 5 and first.context.data == corpus  # make_input_fn named the folder it read
    assert first.context.cpu_only == (not tf.config.list_physical_devices("GPU"))
    assert first.summary().startswith("input wait over 5 steps, ")
    assert f"`tfpipe bench --data {corpus} --variants naive,optimized" in verdict(WaitStats(5, 20, 1.0, 0.5),
                                                                                 first.context)
    again = InputWaitHook(every_n_steps=0, warmup_steps=1, report=lines.append)
    estimator.train(input_fn, max_steps=6, hooks=[again])  # already at max_steps: skipped
    assert again.stats.steps == 0
    assert again.summary().startswith("input wait: no training step ran") and "max_steps" in again.summary()


def test_a_step_fed_without_an_iterator_is_named():
    with pytest.raises(ValueError, match=r"every_n_steps=-1, warmup_steps=10\): both must be >= 0"):
        InputWaitHook(every_n_steps=-1)
    lines = []
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 4])
        step = tf.compat.v1.train.get_or_create_global_step()
        train_op, total = tf.compat.v1.assign_add(step, 1), tf.reduce_sum(x)
        hook = InputWaitHook(every_n_steps=0, warmup_steps=1, report=lines.append)
        with tf.compat.v1.train.MonitoredSession(hooks=[hook]) as sess:
            for _ in range(3):
                sess.run([train_op, total], feed_dict={x: np.ones((2, 4), np.float32)})
    assert "reads its batch from no tf.data iterator or queue" in lines[0]
    assert hook.stats.steps == 2 and hook.stats.wait_seconds == 0.0


def _train(tmp_path, name, input_fn, steps, **params):
    """(hook, wall clock) after training the linear model on input_fn."""
    hook, clock = InputWaitHook(every_n_steps=0, warmup_steps=5), _WallClock()
    estimator = tf.estimator.Estimator(_model_fn, config=_config(tmp_path, name, save_summary_steps=10**6),
                                       params=params)
    estimator.train(input_fn, steps=steps, hooks=[hook, clock])
    return hook, clock


def test_the_wait_share_matches_what_caching_the_input_saves(tmp_path):
    # The pipeline takes 60 ms a batch and the model 20 ms a step (both sleeps, so a busy machine
    # moves neither much): with prefetch, each step waits ~40 of its ~60 ms for data.
    slow = _input_fn(sleep_s=0.06)
    real, real_clock = _train(tmp_path, "real", slow, 30, sleep_s=0.02)
    cached, cached_clock = _train(tmp_path, "cached", lambda: slow().take(1).cache().repeat(), 30, sleep_s=0.02)
    expected = 1 - cached_clock.median_step(5) / real_clock.median_step(5)
    assert 0.4 < expected < 0.9  # the setting does what it is meant to
    assert real.stats.input_wait_share == pytest.approx(expected, abs=0.1)
    assert cached.stats.input_wait_share < 0.1


def test_a_naive_wav_chain_reads_input_bound_and_a_cached_one_with_a_wide_model_compute_bound(tmp_path):
    # Batches of 32 one-second clips, each read and computed one by one (~10 ms a batch) against a
    # linear model's ~1 ms step: input-bound even when another process shares the cores.
    data = make_corpus(tmp_path / "wavs", per_class=8, seconds=1.0)
    features = AudioConfig(clip_seconds=1.0)
    naive = make_input_fn(data, "train", PipelineConfig.naive(batch_size=32), features)
    slow, _ = _train(tmp_path, "naive", naive, 20)
    optimized = make_input_fn(data, "train", PipelineConfig.optimized(batch_size=8), features)
    cached = lambda: optimized().take(1).cache().repeat()  # noqa: E731  (in memory: input costs ~nothing)
    wide, _ = _train(tmp_path, "wide", cached, 20, hidden=(4096, 4096))
    assert verdict(slow.stats).startswith("input-bound"), verdict(slow.stats)
    assert verdict(wide.stats).startswith("compute-bound"), verdict(wide.stats)


_MIRRORED = r"""
import os, sys, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import tfpipe
from tfpipe.train.estimator import InputWaitHook, make_input_fn, train_distribute

data, model_dir = sys.argv[1], sys.argv[2]
pipe = tfpipe.PipelineConfig.optimized(batch_size=3, seed=1)

def model_fn(features, labels, mode, params):
    logits = tf.keras.layers.Dense(3)(tf.reduce_mean(features["log_mel"], axis=1))
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

config = tf.estimator.RunConfig(model_dir=model_dir, train_distribute=train_distribute(pipe, ["/cpu:0", "/cpu:1"]),
                                log_step_count_steps=None, save_summary_steps=4,
                                session_config=tf.compat.v1.ConfigProto(device_count={"CPU": 2}))
hook = InputWaitHook(every_n_steps=0, warmup_steps=2)
tf.estimator.Estimator(model_fn, config=config).train(
    make_input_fn(data, "train", pipe, tfpipe.AudioConfig(clip_seconds=0.25)), max_steps=10, hooks=[hook])
print(json.dumps(hook.stats.__dict__ | {"share": hook.stats.input_wait_share}))
"""


def test_under_mirrored_strategy_on_two_devices_every_replicas_batch_counts(corpus, tmp_path):
    out = subprocess.run([sys.executable, "-c", _MIRRORED, corpus, str(tmp_path / "model")],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    stats = json.loads(out.stdout.strip().splitlines()[-1])
    assert stats["steps"] == 8 and stats["examples"] == 8 * 2 * 3  # two replicas, 3 examples each
    assert stats["step_seconds"] > 0 and 0 <= stats["share"] <= 1
    assert set(_tensorboard_scalars(str(tmp_path / "model"))) == {"tfpipe/input_wait_share",
                                                                   "tfpipe/examples_per_sec"}
