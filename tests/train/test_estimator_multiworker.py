"""Multi-worker Estimator training: two real worker processes, TF_CONFIG, MultiWorkerMirroredStrategy.

Each worker runs `tf.estimator.train_and_evaluate` with `train_distribute=MultiWorkerMirroredStrategy`;
the Estimator calls tfpipe's input_fn with an InputContext, and a tap in the chain records which
examples that worker's pipeline produced. This file is also the worker program (see `__main__`).
"""

import json
import os
import subprocess
import sys

import numpy as np

STEPS = 12


def _run_workers(data, tmp_path, timeout=150):
    """Runs two worker processes of this file under one TF_CONFIG cluster; returns their results."""
    from tfpipe.service.bench import free_ports

    ports = free_ports(2)
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    procs = []
    for i in range(2):
        tf_config = {"cluster": cluster, "task": {"type": "worker", "index": i}}
        env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), TF_CPP_MIN_LOG_LEVEL="3")
        procs.append(subprocess.Popen([sys.executable, __file__, data, str(tmp_path / "model"),
                                       str(tmp_path / f"worker{i}.json")], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    try:
        outputs = [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return [(p.returncode, out, tmp_path / f"worker{i}.json")
            for i, (p, out) in enumerate(zip(procs, outputs))]


def _reference(data):
    """Per-file log-mel sums of the whole set, in file order, from the local eval pipeline."""
    from tfpipe import PipelineConfig, build_dataset

    ds = build_dataset(data, "eval", PipelineConfig.optimized(batch_size=64))
    return np.concatenate([f["log_mel"].sum(axis=(1, 2)) for f, _ in ds.as_numpy_iterator()])


def test_two_estimator_workers_each_read_a_disjoint_half_of_the_files(corpus, tmp_path):
    results = _run_workers(corpus, tmp_path)
    for code, out, _ in results:
        assert code == 0, out[-3000:]
    reference = _reference(corpus)
    files_read = []
    for i, (_, _, path) in enumerate(results):
        record = json.loads(path.read_text())
        assert record["contexts"] == [[2, i]]  # the Estimator's InputContext: 2 pipelines, this worker's id
        sums = np.array(record["seen"])
        # Which file each example came from: its log-mel sum matches exactly one file's.
        nearest = np.abs(sums[:, None] - reference[None, :]).argmin(axis=1)
        assert np.allclose(sums, reference[nearest], rtol=1e-5)
        files_read.append(set(nearest.tolist()))
    assert len(files_read[0]) == len(files_read[1]) == 6  # each worker: half of the 12 files
    assert files_read[0].isdisjoint(files_read[1])
    assert files_read[0] | files_read[1] == set(range(12))


def test_fewer_shards_than_workers_stops_both_workers_with_the_fix(corpus, tmp_path):
    from tfpipe import write_shards

    write_shards(corpus, tmp_path / "one_shard", num_shards=1, num_workers=0)
    results = _run_workers(str(tmp_path / "one_shard"), tmp_path)
    for code, out, _ in results:
        assert code != 0
        assert "1 files but 2 input pipelines" in out and "tfpipe prepare --num_shards 2" in out, out[-3000:]


def _worker_main(data, model_dir, out_path):
    """One worker: train_and_evaluate under MultiWorkerMirroredStrategy, recording the examples it read."""
    import tensorflow as tf

    import tfpipe

    seen, contexts = [], []
    base = tfpipe.make_input_fn(data, "train", tfpipe.PipelineConfig.optimized(batch_size=2, seed=0))

    def input_fn(params=None, input_context=None):
        contexts.append(input_context and [input_context.num_input_pipelines,
                                           input_context.input_pipeline_id])
        ds = base(params, input_context)

        def tap(features, labels):
            def record(log_mel):
                seen.extend(float(v) for v in log_mel.numpy().sum(axis=(1, 2)))
                return log_mel

            log_mel = tf.py_function(record, [features["log_mel"]], tf.float32)
            log_mel.set_shape(features["log_mel"].shape)
            return {"log_mel": log_mel}, labels

        return ds.map(tap)

    def model_fn(features, labels, mode):
        logits = tf.keras.layers.Dense(3)(tf.reduce_mean(features["log_mel"], axis=[1, 2])[:, None])
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(
            loss, tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    config = tf.estimator.RunConfig(model_dir=model_dir,
                                    train_distribute=tf.distribute.MultiWorkerMirroredStrategy(),
                                    save_checkpoints_steps=1000, log_step_count_steps=1000)
    estimator = tf.estimator.Estimator(model_fn, config=config)
    tf.estimator.train_and_evaluate(estimator, tf.estimator.TrainSpec(input_fn, max_steps=STEPS),
                                    tf.estimator.EvalSpec(input_fn, steps=1))
    with open(out_path, "w") as f:
        json.dump({"contexts": contexts, "seen": seen}, f)


if __name__ == "__main__":
    _worker_main(*sys.argv[1:4])
