"""A tf.data service cluster on this host, and the 1-vs-N worker benchmark behind `tfpipe serve bench`.

The cluster is the real thing at small scale: a dispatcher in this process and
`tfpipe serve worker` subprocesses, which tests kill and restart to see what a
consumer lives through. The benchmark times the same train chain read locally and
through 1, 2, ... such workers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Iterator, Optional, Sequence, TextIO

import tensorflow as tf

from tfpipe.bench.text import align_table
from tfpipe.config import PipelineConfig
from tfpipe.core.chain import build_dataset
from tfpipe.core.source import Data
from tfpipe.service.servers import start_dispatcher

_service = tf.data.experimental.service


@dataclasses.dataclass
class LocalCluster:
    """A dispatcher in this process and worker subprocesses, all on localhost.

    Attributes:
      dispatcher: the in-process DispatchServer.
      target: "grpc://localhost:PORT", the value for PipelineConfig.data_service.
      ports: each worker's port.
      pin_workers: worker i runs on CPU i only (Linux), like one single-core machine each.
      workers: the `tfpipe serve worker` processes (kill one to simulate a lost worker).
    """

    dispatcher: _service.DispatchServer
    target: str
    ports: list[int]
    pin_workers: bool = False
    workers: list[subprocess.Popen] = dataclasses.field(default_factory=list)
    _logs: list[Any] = dataclasses.field(default_factory=list)

    def start_worker(self, i: int) -> subprocess.Popen:
        """(Re)starts worker `i` on its port, as a supervisor restarting a lost worker would."""
        if i < len(self.workers) and self.workers[i].poll() is None:
            raise ValueError(f"worker {i} (pid {self.workers[i].pid}) is still running")
        if i == len(self.workers):
            self._logs.append(tempfile.TemporaryFile())
            self.workers.append(None)
        address = self.target.split("://", 1)[1]
        command = [sys.executable, "-m", "tfpipe.cli", "serve", "worker", "--dispatcher", address,
                   "--port", str(self.ports[i])]
        self.workers[i] = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self._logs[i],
                                           stderr=subprocess.STDOUT)
        if self.pin_workers and can_pin():
            cpus = sorted(os.sched_getaffinity(0))
            # Set before TensorFlow loads in the child, so all of its threads inherit it.
            os.sched_setaffinity(self.workers[i].pid, {cpus[i % len(cpus)]})
        return self.workers[i]

    def log(self, i: int) -> str:
        """What worker `i` printed so far (status lines, errors)."""
        self._logs[i].seek(0)
        return self._logs[i].read().decode(errors="replace")

    def stop(self) -> None:
        """Stops the workers (SIGTERM, then SIGKILL after 15 s) and the dispatcher."""
        for w in self.workers:
            if w.poll() is None:
                w.terminate()
        for w in self.workers:
            try:
                w.wait(timeout=15)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
        for log in self._logs:
            log.close()
        self.dispatcher.stop()


@contextlib.contextmanager
def local_cluster(num_workers: int, *, worker_timeout_ms: Optional[int] = None, pin_workers: bool = False,
                  start_timeout_s: float = 120.0) -> Iterator[LocalCluster]:
    """Starts a dispatcher here and `num_workers` worker processes; stops them all on exit.

    Args:
      num_workers: worker processes (`python -m tfpipe.cli serve worker`), each on a free port.
      worker_timeout_ms: how long the dispatcher waits for a silent worker.
      pin_workers: pin worker i to CPU i (see LocalCluster).
      start_timeout_s: give up if the workers have not registered by then.

    Raises:
      RuntimeError: a worker exited or did not register in time (its log is in the message).
    """
    dispatcher = start_dispatcher(0, worker_timeout_ms=worker_timeout_ms)
    ports = free_ports(num_workers)
    cluster = LocalCluster(dispatcher, dispatcher.target, ports, pin_workers)
    try:
        for i in range(num_workers):
            cluster.start_worker(i)
        deadline = time.monotonic() + start_timeout_s
        while dispatcher._num_workers() < num_workers:  # pylint: disable=protected-access
            dead = [i for i, w in enumerate(cluster.workers) if w.poll() is not None]
            if dead or time.monotonic() > deadline:
                i = dead[0] if dead else 0
                raise RuntimeError(f"tf.data service worker {i} {'exited' if dead else 'did not register'} "
                                   f"(exit code {cluster.workers[i].poll()}): {cluster.log(i)[-2000:]}")
            time.sleep(0.1)
        yield cluster
    finally:
        cluster.stop()


def can_pin() -> bool:
    """True where worker processes can be pinned to CPUs (Linux)."""
    return hasattr(os, "sched_setaffinity")


def free_ports(n: int) -> list[int]:
    """n different ports nothing listens on right now (all bound on loopback at once, then released)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("localhost", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _domain_of(data: Data, features: Any) -> Any:
    """The domain of the data's files (of `features`, or the default domain, when they name none)."""
    from tfpipe.core.registry import domain_of_config, get_domain
    from tfpipe.core.source import find

    name = getattr(find(data), "domain", "")
    return get_domain(name) if name else domain_of_config(features)


def bench_workers(data: Data, worker_counts: Sequence[int] = (0, 1, 2),
                  pipeline: Optional[PipelineConfig] = None, features: Any = None, *,
                  batches: int = 50, warmup: int = 5, repeats: int = 3, pin_workers: bool = True,
                  out: Optional[TextIO] = None) -> dict[str, Any]:
    """Examples/s of the train chain through 0 (local, no service), 1, 2, ... service workers.

    Each run starts a fresh dispatcher and worker processes on this host, takes
    `warmup` batches untimed, then times `batches` batches. Runs are interleaved
    (1, 2, 1, 2, ...) so machine drift hits every worker count alike. With
    `pin_workers`, worker i may use CPU i only, so each worker stands for one
    single-core machine and "2 workers vs 1" measures adding a machine; unpinned,
    one worker already spreads over every core of this host.

    Args:
      data: a class folder of a domain's files, CSV manifest or shard folder.
      worker_counts: worker counts to compare; 0 runs the chain in this process.
      pipeline: the chain (its data_service fields are replaced); default optimized().
      features: the data's domain config (default: the domain's default); TensorFlow-only
        stages (e.g. no librosa backend), see distribute.
      batches: timed batches per run.
      warmup: untimed batches first (buffers fill, workers get their first files).
      repeats: runs per worker count; the median is reported.
      pin_workers: one CPU per worker (Linux; ignored elsewhere). The local run is never pinned.
      out: progress lines go here (None: quiet).

    Returns:
      {"runs": {count: [examples/s, ...]}, "median": {count: examples/s},
       "speedup": {count: median / median of the smallest service run}, plus the setup}.
    """
    pipeline = pipeline or PipelineConfig.optimized()
    features = _domain_of(data, features).config(features)
    if not worker_counts or min(worker_counts) < 0:
        raise ValueError(f"worker counts {list(worker_counts)}: expected counts >= 0, e.g. 0,1,2")
    runs: dict[int, list[float]] = {n: [] for n in worker_counts}
    for r in range(repeats):
        for n in worker_counts:
            servers = local_cluster(n, pin_workers=pin_workers) if n else contextlib.nullcontext(None)
            with servers as cluster:
                p = dataclasses.replace(pipeline, data_service=cluster.target if cluster else "",
                                        data_service_job="")
                it = iter(build_dataset(data, "train", p, features))
                for _ in range(warmup):
                    next(it)
                start, examples = time.perf_counter(), 0
                for _ in range(batches):
                    examples += int(tf.shape(next(it)[1])[0])
                runs[n].append(examples / (time.perf_counter() - start))
                del it  # release the job before its workers stop
            if out:
                print(f"run {r + 1}/{repeats}: {_arm(n)}: {runs[n][-1]:,.1f} examples/s", file=out,
                      flush=True)
    median = {n: statistics.median(rates) for n, rates in runs.items()}
    base = min((n for n in worker_counts if n), default=None)
    return {"data": data.root if hasattr(data, "chain_input") else os.fspath(data),
            "pipeline": dataclasses.asdict(pipeline), "features": dataclasses.asdict(features),
            "cpus": os.cpu_count(), "pinned": pin_workers and can_pin(), "batches": batches, "warmup": warmup,
            "repeats": repeats, "runs": runs, "median": median,
            "speedup": {n: median[n] / median[base] for n in worker_counts if base}}


def format_bench(result: dict[str, Any]) -> str:
    """The bench result as a table: worker count, median examples/s, ratio to the smallest service run."""
    rows = [("workers", "examples/s (median)", "runs", "vs first service run")]
    for n, rate in result["median"].items():
        ratio = result["speedup"].get(n)
        rows.append((_arm(n), f"{rate:,.1f}", " ".join(f"{x:,.0f}" for x in result["runs"][n]),
                     f"{ratio:.2f}x" if ratio is not None and n else ""))
    table = "\n".join(align_table(rows))
    if result["pinned"]:
        note = (f"each worker pinned to one of this host's {result['cpus']} CPUs (one small machine each); "
                f"the local run uses all of them; the reading process is not pinned and shares the CPUs")
    else:
        note = (f"workers not pinned: they share this host's {result['cpus']} CPUs, so N workers beat one "
                f"only while one worker leaves CPUs idle")
    return f"{table}\n{note}"


def _arm(n: int) -> str:
    """'local' for 0 workers, else the count."""
    return "local" if n == 0 else f"{n} worker{'s' if n > 1 else ''}"
