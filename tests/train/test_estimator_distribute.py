"""prefetch_to_device for the Estimator: a MirroredStrategy whose MultiDeviceIterator prefetches per replica.

There is no GPU here, so the multi-replica path runs on two logical CPU devices (set
before TensorFlow starts, hence the subprocess); the code is the one a GPU host runs.
"""

import subprocess
import sys

import tensorflow as tf

import tfpipe
from tfpipe.train.estimator import train_distribute

_SCRIPT = r"""
import os, sys, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import tfpipe
from tfpipe.train.estimator import make_input_fn, train_distribute

data, model_dir = sys.argv[1], sys.argv[2]
feat = tfpipe.AudioConfig(clip_seconds=0.25)
pipe = tfpipe.PipelineConfig.optimized(batch_size=3, seed=1)
strategy = train_distribute(pipe, devices=["/cpu:0", "/cpu:1"])
seen_contexts = []

def model_fn(features, labels, mode, params):
    logits = tf.keras.layers.Dense(3)(tf.reduce_mean(features["log_mel"], axis=1))
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    ones = tf.ones_like(labels, tf.bool)
    count = tf.compat.v1.metrics.true_positives(ones, ones)  # examples evaluated
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops={"examples": count})

train_fn = make_input_fn(data, "train", pipe, feat)
def recording_input_fn(params=None, input_context=None, config=None):
    seen_contexts.append((input_context.num_input_pipelines, input_context.num_replicas_in_sync))
    return train_fn(params, input_context, config)

# An Estimator's sessions see only the CPU devices their ConfigProto names.
config = tf.estimator.RunConfig(model_dir=model_dir, train_distribute=strategy, log_step_count_steps=10**6,
                                session_config=tf.compat.v1.ConfigProto(device_count={"CPU": 2}))
est = tf.estimator.Estimator(model_fn, config=config)
est.train(recording_input_fn, max_steps=4)
metrics = est.evaluate(make_input_fn(data, "eval", pipe, feat))
print(json.dumps({"replicas": strategy.num_replicas_in_sync, "contexts": seen_contexts,
                  "step": int(est.get_variable_value("global_step")), "examples": float(metrics["examples"])}))
"""


def test_no_strategy_without_an_accelerator_unless_devices_are_named():
    assert not tf.config.list_logical_devices("GPU")
    assert train_distribute(tfpipe.PipelineConfig.optimized()) is None  # CPU: nothing to prefetch onto
    assert train_distribute(tfpipe.PipelineConfig.naive()) is None
    strategy = train_distribute(devices=["/cpu:0"])
    assert isinstance(strategy, tf.distribute.MirroredStrategy) and strategy.num_replicas_in_sync == 1


def test_estimator_trains_on_two_replicas_and_evaluates_every_example_once(corpus, tmp_path):
    out = subprocess.run([sys.executable, "-c", _SCRIPT, corpus, str(tmp_path / "model")],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    import json

    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["replicas"] == 2 and result["step"] == 4
    assert result["contexts"] and all(c == [1, 2] for c in result["contexts"])  # one pipeline feeds both
    assert result["examples"] == 12  # eval: one ordered pass on one device, every clip once
