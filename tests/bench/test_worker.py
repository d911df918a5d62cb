"""bench/worker.py: a user's chain tells its epoch; a failing variant comes back to the parent in one line."""

import multiprocessing

import pytest
import tensorflow as tf

from tfpipe import bench
from tfpipe.bench import worker
from tfpipe.config import PipelineConfig


def test_a_user_chains_epoch_is_read_from_its_ops(user_file):
    # 18 clips in batches of 4, remainder dropped, then the seed's repeat (naive) or repeat first (optimized).
    make = bench.load_fn(f"{user_file}:dataset_fn")
    for pipeline in (PipelineConfig.naive(batch_size=4), PipelineConfig.optimized(batch_size=4)):
        assert worker._epoch_batches(make(pipeline, "train"), 4) == 4
    assert worker._epoch_batches(tf.data.Dataset.random(seed=0).batch(2), 2) is None  # endless source: unknown


def test_a_tensorflow_error_is_reported_by_its_first_line():
    def check(x):
        with tf.control_dependencies([tf.debugging.assert_less(x, tf.constant(1, tf.int64), message="x too big")]):
            return tf.identity(x)

    ds = tf.data.Dataset.range(3).map(check)
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        list(ds)
    message = worker._message(raised.value)
    assert "x too big" in message and "\n" not in message and "[[" not in message


def test_a_dataset_fn_that_raises_in_its_worker_is_named_in_the_parent(user_file):
    spec = f"{user_file}:broken_fn"
    with pytest.raises(bench.UserFunctionError, match=rf"^variant 'naive': dataset_fn {spec} raised "
                                                       rf"ZeroDivisionError: .* \(at {user_file}:\d+, in broken_fn\)$"):
        bench.run(dataset_fn=spec, variants=["naive"], batches=1, repeats=1, warmup=0, progress=False)
    assert multiprocessing.active_children() == []  # every worker ended
