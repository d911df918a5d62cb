"""Resume: the train stream at start_step K is batches K, K+1, ... of the stream from 0, at no cost."""

import collections
import dataclasses
import os

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tests.support import make_corpus, write_tone
from tfpipe.train.estimator import make_input_fn

FEAT = tfpipe.AudioConfig(clip_seconds=0.25)
PIPE = tfpipe.PipelineConfig.optimized(batch_size=5, seed=7, deterministic=True)


def _keys(ds, batches, key="log_mel"):
    """One number per example identifying its file (every test clip has its own pitch)."""
    weights = np.linspace(0.0, 1.0, 500)
    return [round(float(x[:500] @ weights[:x[:500].size]), 2) for f, _ in ds.take(batches).as_numpy_iterator()
            for x in f[key].reshape(len(f[key]), -1)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = make_corpus(tmp_path_factory.mktemp("resume") / "corpus", per_class=4)  # 12 clips
    shards = str(tmp_path_factory.mktemp("resume") / "shards")
    tfpipe.write_shards(root, shards, num_shards=3, num_workers=0, features=FEAT, progress=False)
    return {"wav": root, "shards": shards}


def _user_files(root):
    source = tfpipe.find(root)

    def read(path, label):
        return {"wave": tf.audio.decode_wav(tf.io.read_file(path)).audio[:, 0]}, label

    return (list(source.paths), list(source.labels)), dict(read=read)


@pytest.mark.parametrize("kind", ["wav", "user", "shards"])
def test_stream_at_start_step_equals_the_uninterrupted_stream(data, kind):
    args, kwargs, key = (data[kind], {}, "log_mel") if kind != "user" else (*_user_files(data["wav"]), "wave")
    full = _keys(tfpipe.build_dataset(args, "train", PIPE, None if kind == "shards" else FEAT if kind == "wav"
                                      else None, start_step=0, **kwargs), 12, key)
    later = _keys(tfpipe.build_dataset(args, "train", PIPE, None if kind == "shards" else FEAT if kind == "wav"
                                       else None, start_step=7, **kwargs), 5, key)
    assert later == full[35:]  # steps 7.. of 5 examples
    assert collections.Counter(full[:24]) == collections.Counter(full[24:48])  # whole epochs, reshuffled
    if kind != "shards":
        assert len(set(full[:12])) == 12 and full[:12] != full[12:24]  # each epoch: every file once


def test_unordered_parallel_maps_keep_the_examples_of_each_epoch(data):
    loose = dataclasses.replace(PIPE, deterministic=False)
    full = _keys(tfpipe.build_dataset(data["wav"], "train", PIPE, FEAT, start_step=0), 24)
    later = _keys(tfpipe.build_dataset(data["wav"], "train", loose, FEAT, start_step=12), 12)
    # Examples 60..119 = epochs 5..9; unordered maps may swap a few across the last edge only.
    differ = collections.Counter(later) - collections.Counter(full[60:120])
    assert sum(differ.values()) <= 4, differ


def test_a_million_steps_in_reads_nothing_before_the_step(data):
    source = tfpipe.find(data["wav"])
    reads = []

    def count(path):
        reads.append(path)
        return path

    def read(path, label):
        counted = tfpipe.python_fn(count, tf.TensorSpec([], tf.string))(path)
        return {"wave": tf.audio.decode_wav(tf.io.read_file(counted)).audio[:, 0]}, label

    pipe = dataclasses.replace(PIPE, prefetch=False, parallel_map=False)
    ds = tfpipe.build_dataset((list(source.paths), list(source.labels)), "train", pipe, read=read,
                              start_step=10 ** 6)
    next(iter(ds))
    assert len(reads) == PIPE.batch_size  # one batch read: nothing of the 5 million examples before it


def _model_fn(features, labels, mode, params):
    """A tiny classifier that also exposes one key per example for the recording hook."""
    profile = tf.reduce_mean(features["log_mel"], axis=1)  # per mel band: where the clip's pitch is
    tf.identity(tf.reduce_sum(profile * tf.range(64, dtype=tf.float32), axis=1), name="example_keys")
    logits = tf.keras.layers.Dense(3)(tf.reduce_mean(features["log_mel"], axis=1))
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


class _Record(tf.compat.v1.train.SessionRunHook):
    """Records the example keys of every training batch."""

    def __init__(self, seen):
        self.seen = seen

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(tf.compat.v1.get_default_graph().get_tensor_by_name("example_keys:0"))

    def after_run(self, run_context, run_values):
        self.seen.extend(round(float(x), 3) for x in run_values.results)


def _estimator(model_dir, save_steps=1000):
    config = tf.estimator.RunConfig(model_dir=model_dir, save_checkpoints_steps=save_steps, log_step_count_steps=10 ** 6)
    return tf.estimator.Estimator(_model_fn, config=config)


def test_estimator_train_twice_sees_what_train_once_sees(data, tmp_path):
    input_fn = make_input_fn(data["wav"], "train", PIPE, FEAT)
    once, twice = [], []
    _estimator(str(tmp_path / "once")).train(input_fn, steps=6, hooks=[_Record(once)])
    est = _estimator(str(tmp_path / "twice"))
    est.train(input_fn, steps=3, hooks=[_Record(twice)])
    est.train(input_fn, steps=3, hooks=[_Record(twice)])
    assert twice == once and len(once) == 30
    fresh = []
    est2 = _estimator(str(tmp_path / "noresume"))
    no_resume = make_input_fn(data["wav"], "train", PIPE, FEAT, resume=False)
    est2.train(no_resume, steps=3, hooks=[_Record(fresh)])
    est2.train(no_resume, steps=3, hooks=[_Record(fresh)])
    assert fresh[:15] == fresh[15:]  # the old behaviour: every call starts the data again


def test_train_and_evaluate_sees_each_example_as_often_as_an_uninterrupted_run(data, tmp_path):
    seen = []
    est = _estimator(str(tmp_path / "tae"), save_steps=6)
    train_spec = tf.estimator.TrainSpec(make_input_fn(data["wav"], "train", PIPE, FEAT), max_steps=24,
                                        hooks=[_Record(seen)])
    eval_spec = tf.estimator.EvalSpec(make_input_fn(data["wav"], "eval", PIPE, FEAT), steps=None,
                                      throttle_secs=0, start_delay_secs=0)
    tf.estimator.train_and_evaluate(est, train_spec, eval_spec)  # evaluates at steps 6, 12, 18, 24
    counts = collections.Counter(seen)
    assert len(seen) == 120 and len(counts) == 12 and set(counts.values()) == {10}  # 10 whole epochs


def _train(model_dir, data, steps, batch_size, seen):
    pipe = dataclasses.replace(PIPE, batch_size=batch_size)
    _estimator(model_dir).train(make_input_fn(data, "train", pipe, FEAT), steps=steps, hooks=[_Record(seen)])


def test_a_changed_batch_size_continues_at_the_same_example(tmp_path):
    data = make_corpus(tmp_path / "c", per_class=13)  # 39 clips
    model_dir, seen = str(tmp_path / "m"), []
    _train(model_dir, data, 2, 8, seen)  # examples 0..15 of the stream
    _train(model_dir, data, 2, 16, seen)  # examples 16..47: the first epoch ends at 39
    assert len(seen) == 48 and len(set(seen[:39])) == 39  # every clip once in the first epoch


def test_files_added_before_resuming_start_a_new_epoch_of_the_new_files(tmp_path, caplog):
    data = make_corpus(tmp_path / "c", per_class=13)
    model_dir, seen = str(tmp_path / "m"), []
    _train(model_dir, data, 2, 8, seen)
    write_tone(os.path.join(data, "a", "0first.wav"), 3000, seconds=0.25)  # sorts first: every position shifts
    after = []
    with caplog.at_level("WARNING", logger="tfpipe"):
        _train(model_dir, data, 6, 8, after)
    assert "the input files changed since step 0 (39 -> 40 examples): resuming at the start of epoch 1" in caplog.text
    assert len(set(after[:40])) == 40  # the new epoch: each of the 40 clips once, none repeated or skipped


def test_resume_with_a_cache_is_refused_with_the_choice_it_leaves():
    cached = dataclasses.replace(PIPE, cache="memory")
    with pytest.raises(ValueError, match=r"resume=True\) with cache='memory'.*pass resume=False"):
        make_input_fn("data/", "train", cached)
    make_input_fn("data/", "train", cached, resume=False)  # the user's explicit choice
    make_input_fn("data/", "eval", cached)  # eval never resumes
