"""tf.data service: real dispatchers and workers on localhost, in-process and as subprocesses."""

import collections
import dataclasses
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
import tensorflow as tf

from tests.support import make_corpus
from tfpipe.service import bench as service_bench
from tfpipe.service import client as service
from tfpipe.service import servers as service_servers
from tfpipe.config import PipelineConfig
from tfpipe.domains.audio.config import AudioConfig
from tfpipe.train.estimator import make_input_fn
from tfpipe.core.chain import build_dataset
from tfpipe.core.graph import dataset_ops
from tfpipe.storage.writer import write_shards

FEAT = AudioConfig(clip_seconds=0.25)


@pytest.fixture
def servers():
    """A dispatcher and two workers in this process; yields the dispatcher's grpc:// address."""
    dispatcher = service_servers.start_dispatcher()
    workers = [service_servers.start_worker(dispatcher.target) for _ in range(2)]
    yield dispatcher.target
    for server in workers + [dispatcher]:
        server.stop()


def _examples(ds, key="log_mel"):
    """Multiset of (label, features bytes) over a whole dataset: order-free, exact."""
    return collections.Counter((int(label), feats.tobytes()) for f, labels in ds.as_numpy_iterator()
                               for feats, label in zip(f[key], labels))


@pytest.mark.parametrize("preset", ["optimized", "naive"])
def test_one_epoch_through_two_workers_holds_exactly_the_local_examples(corpus, servers, preset):
    local = PipelineConfig.preset(preset, batch_size=5)
    ops = dataset_ops(build_dataset(corpus, "eval", dataclasses.replace(local, data_service=servers), FEAT))
    # The service is the local chain's source: reading, decoding, batching and log-mel run on the workers
    # (the one local map is the service's own decompression).
    assert ops[0].startswith("DataServiceDataset") and "BatchDatasetV2" not in ops, ops
    # Compared as waveforms: each worker batches its own files (batches of 5 and 1 where the local
    # chain has 5, 5 and 2), and a log-mel computed in another batch can differ in its last bit on
    # some CPUs (3 of 12 keys differed once); decoded samples are exact whatever the batch.
    wave = dataclasses.replace(FEAT, output="waveform")
    remote = build_dataset(corpus, "eval", dataclasses.replace(local, data_service=servers), wave)
    expected = _examples(build_dataset(corpus, "eval", local, wave), "waveform")
    assert sum(expected.values()) == 12
    assert _examples(remote, "waveform") == expected


def test_shard_folder_epoch_through_the_service(corpus, servers, tmp_path):
    write_shards(corpus, tmp_path / "shards", num_shards=4, num_workers=0, features=FEAT)
    pipe = PipelineConfig.optimized(batch_size=5)
    remote = build_dataset(tmp_path / "shards", "eval", dataclasses.replace(pipe, data_service=servers), FEAT)
    assert _examples(remote) == _examples(build_dataset(tmp_path / "shards", "eval", pipe, FEAT))


def test_parallel_epochs_gives_every_worker_the_whole_dataset(corpus, servers):
    pipe = PipelineConfig.optimized(batch_size=5)
    remote = dataclasses.replace(pipe, data_service=servers, data_service_mode="parallel_epochs")
    once = _examples(build_dataset(corpus, "eval", pipe, FEAT))
    assert _examples(build_dataset(corpus, "eval", remote, FEAT)) == once + once  # 2 workers, 2 copies


def test_consumers_sharing_a_job_split_one_epoch(corpus, servers):
    # Waveforms: decoded samples are exact whatever the batch. A log-mel computed in batches of 1 can
    # differ in the last bit from one computed in batches of 64 on some CPUs, so comparing log-mels across
    # batch sizes failed on such machines ("Left contains 12 more items": 12 keys on each side differed).
    wave = dataclasses.replace(FEAT, output="waveform")
    pipe = PipelineConfig.optimized(batch_size=1, data_service=servers, data_service_job="shared-epoch")
    iterators = [iter(build_dataset(corpus, "eval", pipe, wave)) for _ in range(2)]
    taken = [collections.Counter(), collections.Counter()]
    live = [0, 1]
    while live:  # read alternately until both consumers reach the end of the shared epoch
        for i in list(live):
            try:
                f, label = next(iterators[i])
                taken[i][(int(label[0]), f["waveform"][0].numpy().tobytes())] += 1
            except StopIteration:
                live.remove(i)
    expected = _examples(build_dataset(corpus, "eval", PipelineConfig.optimized(batch_size=1), wave), "waveform")
    assert sum(taken[0].values()) + sum(taken[1].values()) == sum(expected.values()) == 12  # none twice
    assert taken[0] + taken[1] == expected


def test_estimator_trains_from_the_service(corpus, servers, tmp_path):
    pipe = PipelineConfig.optimized(batch_size=4, data_service=servers)

    def model_fn(features, labels, mode):
        logits = tf.keras.layers.Dense(3)(tf.reduce_mean(features["log_mel"], axis=1))
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
        train_op = tf.compat.v1.train.AdamOptimizer(0.01).minimize(loss, tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    estimator = tf.estimator.Estimator(model_fn, str(tmp_path / "model"))
    estimator.train(make_input_fn(corpus, "train", pipe, FEAT), max_steps=3)  # input_fn runs in graph mode
    assert estimator.get_variable_value("global_step") == 3


@pytest.mark.parametrize("change, message", [
    (dict(cache="memory"), r"cache='memory' cannot run .* distributed_epoch.*--cache=''"),
    (dict(data_service=""), r"data_service is empty.*grpc://HOST:PORT"),
])
def test_distribute_refuses_what_the_service_cannot_run(change, message):
    pipe = PipelineConfig.optimized(data_service="grpc://localhost:1")
    with pytest.raises(ValueError, match=message):
        service.distribute(tf.data.Dataset.range(3), dataclasses.replace(pipe, **change))


def test_python_features_and_shared_jobs_over_shards_are_refused(corpus):
    pipe = PipelineConfig.optimized(data_service="grpc://localhost:1")
    with pytest.raises(ValueError, match=r"runs Python.*backend='librosa'.*--backend=tf"):
        build_dataset(corpus, "eval", pipe, dataclasses.replace(FEAT, backend="librosa"))
    ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=0)
    with pytest.raises(ValueError, match=r"data_service_job='j' with per-worker file sharding"):
        build_dataset(corpus, "train", dataclasses.replace(pipe, data_service_job="j"), FEAT,
                      input_context=ctx)


def _start_cli(*args):
    """`tfpipe serve ...` as a subprocess; returns it with its first status line read."""
    proc = subprocess.Popen([sys.executable, "-m", "tfpipe.cli", "serve", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    return proc, proc.stdout.readline()


def test_cli_servers_serve_an_epoch_and_stop_cleanly_on_ctrl_c_and_sigterm(corpus):
    dispatcher, line = _start_cli("dispatcher", "--port", "0")
    worker = None
    try:
        port = re.match(r"tfpipe dispatcher: port (\d+) \(all interfaces\), pid (\d+)", line).group(1)
        status = line + "".join(dispatcher.stdout.readline() for _ in range(3))
        assert f"--data_service=grpc://localhost:{port}" in status and "no authentication" in status
        worker, line = _start_cli("worker", "--dispatcher", f"localhost:{port}", "--port", "0")
        assert re.match(rf"tfpipe worker: port \d+ .*registered with dispatcher localhost:{port}; "
                        rf"consumers fetch from localhost:\d+", line), line
        pipe = PipelineConfig.optimized(batch_size=5, data_service=f"grpc://localhost:{port}")
        assert sum(_examples(build_dataset(corpus, "eval", pipe, FEAT)).values()) == 12
        worker.send_signal(signal.SIGTERM)
        dispatcher.send_signal(signal.SIGINT)  # what Ctrl-C sends
        for proc in (worker, dispatcher):
            out, _ = proc.communicate(timeout=30)
            assert proc.returncode == 0 and out.strip().endswith("stopped"), out
    finally:
        for proc in (worker, dispatcher):
            if proc is not None and proc.poll() is None:
                proc.kill()


_IPV6_WORKER = """
import sys
import tensorflow as tf
from tfpipe.service import servers
dispatcher = servers.start_dispatcher()
port = dispatcher.target.rsplit(":", 1)[1]
worker = servers.start_worker(f"[::1]:{port}")  # an IPv6 literal must keep its brackets
ds = tf.data.Dataset.range(10).apply(tf.data.experimental.service.distribute("parallel_epochs", dispatcher.target))
print(sorted(int(x) for x in ds))
"""


def test_a_worker_reaches_a_dispatcher_given_as_an_ipv6_literal():
    out = subprocess.run([sys.executable, "-c", _IPV6_WORKER], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == str(list(range(10)))


def test_cli_serve_needs_a_role_and_a_port():
    out = subprocess.run([sys.executable, "-m", "tfpipe.cli", "serve", "dispatcher"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1 and "--port is required" in out.stderr
    out = subprocess.run([sys.executable, "-m", "tfpipe.cli", "serve", "--port", "0"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1 and "dispatcher | worker | bench" in out.stderr


def test_killed_worker_mid_epoch_is_named_when_it_happens_and_loses_at_most_its_files(tmp_path, capfd):
    # 300 tiny clips: an epoch far longer than what the workers buffer ahead of the consumer.
    data = make_corpus(tmp_path / "c", per_class=100, seconds=0.1)
    feat = AudioConfig(clip_seconds=0.1)
    expected = _examples(build_dataset(data, "eval", PipelineConfig.optimized(batch_size=2), feat))
    got, outcome, finished = collections.Counter(), [], threading.Event()
    with service_bench.local_cluster(2, worker_timeout_ms=1000) as cluster:
        pipe = PipelineConfig.optimized(batch_size=2, data_service=cluster.target)
        batches = build_dataset(data, "eval", pipe, feat).as_numpy_iterator()
        f, labels = next(batches)
        got.update((int(label), x.tobytes()) for x, label in zip(f["log_mel"], labels))
        cluster.workers[0].kill()  # a crash: no goodbye to the dispatcher
        cluster.workers[0].wait()

        def consume():
            try:
                for f, labels in batches:
                    got.update((int(label), x.tobytes()) for x, label in zip(f["log_mel"], labels))
                outcome.append("completed")
            except Exception as e:  # noqa: BLE001 -- recorded and asserted below
                outcome.append(e)
            finished.set()

        threading.Thread(target=consume, daemon=True).start()
        lost = f"localhost:{cluster.ports[0]}"
        said = _wait_for_stderr(capfd, f"tf.data service worker {lost} stopped answering", 30)
        assert "the examples of the files it was processing are lost for this epoch" in said, said
        assert "restart it there (tfpipe serve worker --dispatcher localhost:" in said
        assert f"--port {cluster.ports[0]})" in said
        # Measured: the survivor takes over the remaining files, then the epoch cannot end while
        # the dead worker's task is open; no error reaches the consumer.
        assert not finished.is_set(), outcome
        received_while_down = sum(got.values())
        cluster.start_worker(0)  # a supervisor restarting it at the same address
        assert finished.wait(60), "epoch did not end after the worker came back"
        assert f"worker {lost} answers again" in _wait_for_stderr(capfd, "answers again", 30)
    total, received = sum(expected.values()), sum(got.values())
    lost_examples = sum((expected - got).values())
    print(f"\nworker killed: {received_while_down} of {total} before the restart, {received} at the end, "
          f"{lost_examples} lost, {sum((got - expected).values())} duplicated")
    assert outcome == ["completed"]
    assert not got - expected  # nothing twice, nothing foreign: at most once
    assert received == total - lost_examples and lost_examples < total // 4  # only what the dead worker held


def _wait_for_stderr(capfd, text, seconds):
    """What was written to stderr until `text` appeared (polled, with a deadline)."""
    seen, deadline = "", time.monotonic() + seconds
    while text not in seen:
        assert time.monotonic() < deadline, f"never said {text!r}; stderr: {seen[-2000:]}"
        time.sleep(0.2)
        seen += capfd.readouterr().err
    return seen


def test_training_keeps_reading_from_the_surviving_worker(tmp_path):
    data = make_corpus(tmp_path / "c", per_class=20, seconds=0.1)
    with service_bench.local_cluster(2, worker_timeout_ms=1000) as cluster:
        pipe = PipelineConfig.optimized(batch_size=2, data_service=cluster.target)
        batches = iter(build_dataset(data, "train", pipe, AudioConfig(clip_seconds=0.1)))
        next(batches)
        cluster.workers[1].kill()
        cluster.workers[1].wait()
        start = time.monotonic()
        shapes = [next(batches)[1].shape[0] for _ in range(200)]  # 200 batches = 400 examples, ~7 epochs
        assert shapes == [2] * 200 and time.monotonic() - start < 60


def test_bench_workers_reports_examples_per_second_per_worker_count(corpus):
    result = service_bench.bench_workers(corpus, [0, 1], PipelineConfig.naive(batch_size=4), FEAT,
                                   batches=3, warmup=1, repeats=1)
    assert set(result["median"]) == {0, 1} and all(r > 0 for r in result["median"].values())
    assert result["speedup"][1] == 1.0
    table = service_bench.format_bench(result)
    assert re.search(r"^local\s+[\d,.]+", table, re.M)
    assert re.search(r"^1 worker\s+[\d,.]+.*1\.00x", table, re.M)
