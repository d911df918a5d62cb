"""Running shard jobs on this machine: in this process, or in worker processes that die with it.

Workers fork from a `forkserver` that imported TensorFlow, tfpipe and the domain once (a
plain fork would copy this process's TensorFlow threads; spawn would import TensorFlow once
per worker). Each worker computes with as many intra-op threads as this process does: how a
kernel splits a sum over threads can change a float's last bit, and the shards must be the
same bytes whichever writer (this process, N workers, Beam on this machine) made them. A worker asks
the kernel to kill it when its parent (the forkserver) goes, and the forkserver exits when
this process does, so a SIGKILLed or OOM-killed prepare leaves no worker behind; SIGTERM
stops the workers at once as well.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import multiprocessing
import os
import queue as queue_lib
import signal
import threading
import time
from typing import Callable, Sequence

from tfpipe.storage.shard_job import ShardJob, write_shard

_READY = "ready"  # a worker's first message: TensorFlow loaded, featurizer traced
_PR_SET_PDEATHSIG = 1
_report: Callable[[int], None] = lambda n: None  # noqa: E731  (set per worker process by _init_worker)


def run_jobs(jobs: Sequence[ShardJob], num_workers: int, progress: bool) -> tuple[list[dict], float]:
    """Runs every job (in worker processes unless num_workers == 0).

    Returns:
      The manifests in job order, and the time.perf_counter() when the first worker was ready.
    """
    from tqdm import tqdm

    todo = sum(j.num_inputs for j in jobs)
    with tqdm(total=todo, unit="ex", desc="tfpipe prepare", disable=not progress, smoothing=0.1) as bar:
        if num_workers == 0 or not jobs:
            if jobs and jobs[0].inputs is not None:
                jobs[0].inputs.offline().warm_up()
            ready = time.perf_counter()
            return [write_shard(job, bar.update) for job in jobs], ready
        return _run_pool(jobs, num_workers, bar)


def _run_pool(jobs: Sequence[ShardJob], num_workers: int, bar) -> tuple[list[dict], float]:
    context = multiprocessing.get_context("forkserver")
    inputs = jobs[0].inputs
    domain_module = _domain_module(inputs.domain)
    # TensorFlow named: neither module imports it at the top (a domain's module imports without it).
    context.set_forkserver_preload(["tensorflow", "tfpipe.storage.workers", domain_module])
    _start_forkserver_deaf_to_ctrl_c()
    done_queue = context.Queue()
    ready: list[float] = []
    manifests: dict[int, dict] = {}
    import tensorflow as tf

    threads = tf.config.threading.get_intra_op_parallelism_threads()  # 0: TensorFlow's default, as here
    pool = concurrent.futures.ProcessPoolExecutor(min(num_workers, len(jobs)), mp_context=context,
                                                  initializer=_init_worker, initargs=(done_queue, inputs, threads))
    restore = _stop_on_sigterm()
    try:
        futures = {pool.submit(_pool_job, job): job for job in jobs}
        pending = set(futures)
        while pending:
            finished, pending = concurrent.futures.wait(pending, timeout=0.2,
                                                        return_when=concurrent.futures.FIRST_COMPLETED)
            _drain(done_queue, bar, ready)
            for future in finished:
                job = futures[future]
                try:
                    manifests[job.spec.index] = future.result()
                except concurrent.futures.process.BrokenProcessPool as e:
                    raise RuntimeError(f"a worker process died while writing {job.spec.file} (out of "
                                       f"memory?); finished shards are kept: rerun the same command") from e
    except BaseException:
        _kill_workers(pool)  # an error or SIGTERM: running shards stop now (their temp files are stale)
        raise
    finally:
        restore()
        pool.shutdown(wait=False, cancel_futures=True)  # no waiting for the workers' TensorFlow teardown
    bar.update(bar.total - bar.n)  # the last reports may still be in the queue; the manifests count
    return [manifests[job.spec.index] for job in jobs], (ready or [time.perf_counter()])[0]


def _domain_module(domain: str) -> str:
    from tfpipe.core.registry import get_domain

    return type(get_domain(domain)).__module__


def _start_forkserver_deaf_to_ctrl_c() -> None:
    """Starts the forkserver with SIGINT ignored, which its workers inherit: Ctrl-C reaches every process
    of the terminal's group, and this one stops them (one line from the command, not a traceback from
    each worker and from the forkserver's TensorFlow import)."""
    if threading.current_thread() is not threading.main_thread():
        return
    from multiprocessing import forkserver

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)


def _stop_on_sigterm() -> Callable[[], None]:
    """SIGTERM raises SystemExit in this (main) thread, so the pool is torn down; returns the undo."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    return lambda: signal.signal(signal.SIGTERM, previous)


def _kill_workers(pool: concurrent.futures.ProcessPoolExecutor) -> None:
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        if process.is_alive():
            process.kill()


def _drain(done_queue, bar, ready: list) -> None:
    """Moves the workers' progress reports to the bar and notes when each worker got ready."""
    try:
        while True:
            message = done_queue.get_nowait()
            if message == _READY:
                ready.append(time.perf_counter())
            else:
                bar.update(message)
    except queue_lib.Empty:
        pass


def _init_worker(done_queue, inputs, intra_op_threads: int = 0) -> None:
    """Worker start-up: die with the parent, the parent's intra-op threads, featurizer warmed up."""
    global _report
    _report = done_queue.put
    _die_with_parent()
    import tensorflow as tf

    # Registered after TensorFlow's own handlers, so it runs first at exit: skips their ~1 s
    # teardown. Safe here: every shard is closed and fsynced, and multiprocessing has already
    # flushed this worker's queues when the interpreter starts to exit.
    atexit.register(os._exit, 0)
    # The same intra-op threads as the parent: the same float bits (see the module doc). One inter-op
    # thread: ops run one after another, which changes no result and keeps N workers' threads down.
    tf.config.threading.set_intra_op_parallelism_threads(intra_op_threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    if inputs is not None:
        inputs.offline().warm_up()
    done_queue.put(_READY)


def _die_with_parent() -> None:
    """prctl(PR_SET_PDEATHSIG, SIGKILL) on Linux: no orphaned worker holding its memory.

    The forkserver hands each worker a copy of the pipe end whose EOF tells the forkserver
    that prepare is gone; closed here, or the forkserver (and so the workers) would never see it.
    """
    from multiprocessing import forkserver

    alive = getattr(forkserver._forkserver, "_forkserver_alive_fd", None)  # pylint: disable=protected-access
    if alive is not None:
        try:
            os.close(alive)
        except OSError:
            pass
        forkserver._forkserver._forkserver_alive_fd = None  # pylint: disable=protected-access
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: SIGTERM handling in the parent still stops the workers
    if os.getppid() == 1:
        os._exit(1)  # the parent is already gone


def _pool_job(job: ShardJob) -> dict:
    """write_shard in a worker process, reporting progress through the queue."""
    return write_shard(job, _report)

