"""tfpipe.keras (tfpipe/train/keras.py): InputWaitCallback in real `fit` runs, and the validation split over files."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.train import wait
from tfpipe.train.keras import InputWaitCallback, split_datasets

BATCH = 8


def _dataset(sleep_s=0.0, rows=40):
    """rows/BATCH batches of in-memory data; with sleep_s, each batch takes that long to make."""
    x = np.random.default_rng(0).random((rows, 4), np.float32)
    ds = tf.data.Dataset.from_tensor_slices((x, (x[:, 0] > 0.5).astype(np.int64))).batch(BATCH)
    if sleep_s:
        ds = ds.map(lambda x, y: (tf.ensure_shape(tf.numpy_function(lambda v: time.sleep(sleep_s) or v, [x],
                                                                    tf.float32), [BATCH, 4]), y))
    return ds.prefetch(1)


class _Sleep(tf.keras.layers.Layer):
    """A step that computes for `seconds` once its batch is there (a sleep: a busy machine barely moves it)."""

    def __init__(self, seconds, **kwargs):
        super().__init__(**kwargs)
        self.seconds = seconds

    def call(self, x):
        if not self.seconds:
            return x
        return tf.ensure_shape(tf.numpy_function(lambda v: time.sleep(self.seconds) or v, [x], tf.float32), x.shape)


def _model(sleep_s=0.0, steps_per_execution=1):
    model = tf.keras.Sequential([tf.keras.Input([4]), _Sleep(sleep_s), tf.keras.layers.Dense(2)])
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=steps_per_execution)
    return model


def _tensorboard_scalars(log_dir):
    found = {}
    for folder, _, files in os.walk(log_dir):
        for name in files:
            for event in tf.compat.v1.train.summary_iterator(os.path.join(folder, name)):
                for value in event.summary.value:
                    found.setdefault(value.tag, []).append((event.step, float(tf.make_ndarray(value.tensor))))
    return found


@pytest.mark.parametrize("steps_per_execution", [1, 3])
def test_fit_reports_every_epoch_and_gets_its_train_function_back(tmp_path, steps_per_execution):
    model = _model(steps_per_execution=steps_per_execution)
    lines = []
    callback = InputWaitCallback(log_dir=str(tmp_path / "logs"), report=lines.append)
    model.fit(_dataset(), epochs=3, verbose=0, callbacks=[callback], validation_data=_dataset(rows=16))
    # 5 batches an epoch; the first call of the train function traces it and is not counted
    assert [s.steps for s in callback.epochs] == [5 - steps_per_execution, 5, 5]
    assert [s.examples for s in callback.epochs] == [8 * s.steps for s in callback.epochs]
    assert callback.stats.steps == 15 - steps_per_execution and callback.stats.step_seconds > 0
    assert all(0 <= s.input_wait_share <= 1 for s in callback.epochs)
    assert [line.split(":")[0] for line in lines] == ["epoch 1", "epoch 2", "epoch 3", "input wait over "
                                                      f"{15 - steps_per_execution} steps, "
                                                      f"{callback.stats.examples_per_second:,.0f} examples/s"]
    assert model.train_function is model.train_tf_function  # Keras's own again
    scalars = _tensorboard_scalars(str(tmp_path / "logs"))
    assert [step for step, _ in scalars["tfpipe/input_wait_share"]] == [0, 1, 2]
    assert all(rate > 0 for _, rate in scalars["tfpipe/examples_per_sec"])


def test_a_fit_that_failed_midway_leaves_nothing_in_the_way_of_the_next():
    model = _model()

    def fail_third(x):
        fail_third.calls += 1
        if fail_third.calls == 3:
            raise ValueError("a bad batch")
        return x
    fail_third.calls = 0
    bad = _dataset().map(lambda x, y: (tf.ensure_shape(tf.numpy_function(fail_third, [x], tf.float32), [BATCH, 4]), y))
    with pytest.raises(Exception, match="a bad batch"):
        model.fit(bad, epochs=1, verbose=0, callbacks=[InputWaitCallback()])
    callback = InputWaitCallback(data="photos/")
    assert callback.summary().startswith("input wait: no training step ran: training returned before")
    model.fit(_dataset(), epochs=2, verbose=0, callbacks=[callback])
    assert [s.steps for s in callback.epochs] == [4, 5]  # measured (the first call traces the timed function)
    assert callback.context == wait.WaitContext(cpu_only=not tf.config.list_physical_devices("GPU"), data="photos/")
    assert model.train_function is model.train_tf_function


def _per_step_seconds(model, data, steps):
    """(callback, median wall seconds per step measured apart from it) after `steps` steps of fit."""
    times = []
    clock = tf.keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: times.append(time.perf_counter()))
    callback = InputWaitCallback()
    model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=[callback, clock])
    return callback, float(np.median(np.diff(times[3:])))


def test_the_wait_share_matches_what_caching_the_input_saves():
    # 120 ms a batch, 40 ms a step: with prefetch each step waits ~80 of its ~120 ms. Sleeps this long
    # keep a busy machine's scheduling delays (a few ms) small beside them (it failed under load at 60/20).
    slow = _dataset(sleep_s=0.12, rows=8 * 30).repeat()
    real, real_step = _per_step_seconds(_model(sleep_s=0.04), slow, 15)
    # The input made once, before fit: what a perfect cache gives (no first fill inside a timed step).
    ready = tf.data.Dataset.from_tensors(next(iter(slow))).repeat()
    cached, cached_step = _per_step_seconds(_model(sleep_s=0.04), ready, 15)
    expected = 1 - cached_step / real_step
    assert 0.4 < expected < 0.9
    assert real.stats.input_wait_share == pytest.approx(expected, abs=0.1)
    assert cached.stats.input_wait_share < 0.1


_MIRRORED = r"""
import os, sys, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from tfpipe.train.keras import InputWaitCallback

x = np.random.default_rng(0).random((48, 4), np.float32)
ds = tf.data.Dataset.from_tensor_slices((x, (x[:, 0] > 0.5).astype(np.int64))).batch(8)  # global batch
with tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).scope():
    model = tf.keras.Sequential([tf.keras.Input([4]), tf.keras.layers.Dense(2)])
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), steps_per_execution=2)
callback = InputWaitCallback()
model.fit(ds, epochs=2, verbose=0, callbacks=[callback])
print(json.dumps([s.__dict__ for s in callback.epochs]))
print(any(m.startswith("tensorflow_estimator") for m in sys.modules))  # Keras users never load it
"""


def test_under_mirrored_strategy_each_replicas_share_of_the_batch_counts_and_tf_estimator_never_loads():
    out = subprocess.run([sys.executable, "-c", _MIRRORED], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    *_, stats, estimator_loaded = out.stdout.strip().splitlines()
    epochs = json.loads(stats)
    assert estimator_loaded == "False"
    assert [e["steps"] for e in epochs] == [4, 6]  # 6 batches an epoch, 2 a call; the first call traces
    assert [e["examples"] for e in epochs] == [32, 48]  # 4 + 4 examples per step on the two replicas
    assert all(e["step_seconds"] > 0 for e in epochs)


def test_split_datasets_holds_out_the_same_files_every_time_and_fits_with_validation_data(corpus):
    pipe = tfpipe.PipelineConfig.optimized(batch_size=2, seed=0)
    feat = tfpipe.AudioConfig(clip_seconds=0.25, n_mels=16)
    train, held_out = tfpipe.find(corpus).split(0.34)
    assert len(held_out.paths) > 0 and len(train.paths) > 0
    train_ds, val_ds = split_datasets(corpus, 0.34, pipe, feat, feature_key="log_mel")
    assert sum(len(y) for _, y in val_ds) == len(held_out.paths)  # every held-out file once
    assert sorted(np.concatenate([y for _, y in val_ds]).tolist()) == sorted(held_out.labels)
    assert sum(len(y) for _, y in train_ds) == len(train.paths) // 2 * 2  # one pass, full batches
    again_train, again_val = split_datasets(corpus, 0.34, pipe, feat, feature_key="log_mel")
    assert [y.tolist() for _, y in again_val.as_numpy_iterator()] == [y.tolist() for _, y in val_ds.as_numpy_iterator()]

    model = tf.keras.Sequential([tf.keras.layers.GlobalAveragePooling1D(), tf.keras.layers.Dense(3)])
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(train_ds, validation_data=val_ds, epochs=2, verbose=0)
    assert len(history.history["val_loss"]) == 2


def test_split_datasets_refuses_what_it_cannot_split(corpus, tmp_path):
    with pytest.raises(ValueError, match=r"validation_split=0\): must be between 0 and 1"):
        split_datasets(corpus, 0)
    tfpipe.write_shards(corpus, str(tmp_path / "shards"), num_shards=1, num_workers=0, progress=False,
                        features=tfpipe.AudioConfig(clip_seconds=0.25))
    with pytest.raises(ValueError, match=r"shards source, which cannot be split by file; write separate train"):
        split_datasets(str(tmp_path / "shards"), 0.2)
