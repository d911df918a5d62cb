"""tf.data service, the consumer's side: run a pipeline's expensive part on a dispatcher + workers.

tfpipe builds no cluster of its own. `distribute` hands the batched, featurized chain to
TensorFlow's tf.data service, so only the prefetch runs in the training process (which
watches the workers: tfpipe.service.watch); `check_dispatcher` asks first whether a
dispatcher answers. The servers behind `tfpipe serve` are in tfpipe.service.servers.

The service has no authentication and its servers listen on every interface of
the host (TF 2.15 has no bind-address option): run it on a trusted network only.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Optional
from urllib.parse import urlsplit

import tensorflow as tf

from tfpipe.config import PipelineConfig
from tfpipe.core.graph import walk
from tfpipe.core.registry import register_distributor
from tfpipe.errors import DataError
from tfpipe.service import watch as service_watch

_service = tf.data.experimental.service
_PROCESSING_MODES = {
    "distributed_epoch": _service.ShardingPolicy.DYNAMIC,  # files handed out one by one to free workers
    "parallel_epochs": _service.ShardingPolicy.OFF,  # every worker produces the whole dataset
}
# Ops that call back into this process's Python: a service worker cannot run them.
_PYTHON_OPS = ("PyFunc", "EagerPyFunc", "PyFuncStateless")
# How long a consumer (or a worker that found something listening) waits for a dispatcher to answer:
# long enough for one that is still starting (TensorFlow loads in ~5 s), short enough to be a clear
# failure. TensorFlow's own client has no timeout: it retries for an hour, deaf to Ctrl-C.
# $TFPIPE_DISPATCHER_WAIT_SECONDS sets it (a dispatcher known to be up: less; a slow start: more).
DISPATCHER_WAIT_SECONDS = float(os.environ.get("TFPIPE_DISPATCHER_WAIT_SECONDS") or 10.0)
_ATTEMPT_SECONDS = 2.0  # one TCP connect or one GetVersion call
_GET_VERSION = "/tensorflow.data.DispatcherService/GetVersion"  # the dispatcher's cheapest RPC


def processing_mode(pipeline: PipelineConfig) -> _service.ShardingPolicy:
    """The tf.data service sharding policy for `pipeline.data_service_mode`."""
    return _PROCESSING_MODES[pipeline.data_service_mode]


@register_distributor
def distribute(ds: tf.data.Dataset, pipeline: PipelineConfig) -> tf.data.Dataset:
    """Runs `ds` on the tf.data service at `pipeline.data_service`.

    In "distributed_epoch" mode (the default) the dispatcher hands the chain's
    file list out one file at a time to whichever worker is free, so one epoch
    holds every example exactly once across all workers and all consumers that
    share `data_service_job`; in "parallel_epochs" mode every worker produces the
    whole dataset. Workers open the files by the paths the client sees, so they
    need the same filesystem (or the same paths) as the client.

    Args:
      ds: the chain to run remotely (source through feature maps).
      pipeline: its config; `data_service`, `data_service_mode` and
        `data_service_job` are used here.

    Returns:
      A dataset that reads the chain's elements from the service.

    Raises:
      ValueError: no service address, or a chain the service cannot run as asked.
      DataError: no dispatcher answers at the address within DISPATCHER_WAIT_SECONDS.
    """
    if not pipeline.data_service:
        raise ValueError("PipelineConfig.data_service is empty: set it to the dispatcher, "
                         "e.g. --data_service=grpc://HOST:PORT (start one with `tfpipe serve dispatcher`)")
    mode = processing_mode(pipeline)
    if mode == _service.ShardingPolicy.DYNAMIC and pipeline.cache:
        # Measured: a repeated cache under dynamic sharding never yields; and each worker
        # would cache only the files it happened to get in the first epoch.
        raise ValueError(f"PipelineConfig.cache={pipeline.cache!r} cannot run on the tf.data service in "
                         f"distributed_epoch mode: set --cache='' or --data_service_mode=parallel_epochs")
    _check_runnable_remotely(ds, pipeline)
    watched = None
    if "://" not in pipeline.data_service or pipeline.data_service.startswith("grpc://"):
        check_dispatcher(pipeline.data_service)  # TensorFlow would block here for an hour, silently
        watched = service_watch.watch(*split_address(pipeline.data_service))
    ds = ds.apply(_service.distribute(processing_mode=mode, service=pipeline.data_service,
                                      job_name=pipeline.data_service_job or None))
    if watched is not None and getattr(pipeline, "finite", False):
        # An epoch can end between two of the watcher's looks, shortened by a worker lost in it:
        # one more look when it ends, so that is said too.
        ds = service_watch.at_end(ds, watched.say_now)
    return ds


def _check_runnable_remotely(ds: tf.data.Dataset, pipeline: PipelineConfig) -> None:
    """Raise ValueError for chains that would fail or lose data on the service."""
    nodes = walk(ds, branches=True)
    sharded = getattr(pipeline, "sharded", None)  # the plan's Distribute step says; else the graph
    if sharded is None:
        sharded = any(n.op == "ShardDataset" for n in nodes)
    if pipeline.data_service_job and sharded:
        # Measured: consumers sharing a job but holding different file shards silently lose examples.
        raise ValueError(f"data_service_job={pipeline.data_service_job!r} with per-worker file sharding "
                         f"(an InputContext with several input pipelines): a shared job splits the files "
                         f"itself; drop --data_service_job or build without the input_context")
    if any(op in _PYTHON_OPS for n in nodes for op in n.function_ops):
        # Measured: a worker process fails with "Could not find callback with key=pyfunc_0".
        raise ValueError(f"the chain runs Python (tf.numpy_function, e.g. a domain config's backend='librosa'), "
                         f"which tf.data service workers cannot run (the function lives in this process): "
                         f"use --backend=tf with --data_service={pipeline.data_service}, or read locally "
                         f"(--data_service='')")


# --- reaching a dispatcher ---------------------------------------------------------------------


def check_dispatcher(address: str, timeout: float = DISPATCHER_WAIT_SECONDS, *, flag: str = "--data_service",
                     stop: Optional[threading.Event] = None) -> None:
    """Returns once a tf.data service dispatcher answers at `address`; raises if none does in time.

    TensorFlow's client and worker have no timeout of their own (they retry for an hour, deaf to
    Ctrl-C), so tfpipe asks first: a TCP connect, then the dispatcher's GetVersion call over gRPC.
    Nothing listening is retried until `timeout` (a dispatcher may still be starting); a gRPC
    server without the dispatcher service (e.g. a worker's port) is refused at once.

    Args:
      address: "grpc://HOST:PORT" or "HOST:PORT".
      timeout: seconds to keep trying.
      flag: the setting the user gave the address with, named in the error.
      stop: set it to give up quietly (a server being stopped by Ctrl-C while it waits).

    Raises:
      ValueError: `address` is not HOST:PORT.
      DataError: no dispatcher answered, naming the address, what answered and the fix.
    """
    host, port = split_address(address)
    where = host_port(host, port)
    deadline = time.monotonic() + timeout
    while True:
        found, detail = _ask_dispatcher(host, port, max(0.1, min(_ATTEMPT_SECONDS, deadline - time.monotonic())))
        if found == "dispatcher" or (stop is not None and stop.is_set()):
            return
        if found == "other" or time.monotonic() >= deadline:
            break
        if stop is None:
            time.sleep(0.5)
        elif stop.wait(0.5):
            return
    start = f"start one with `tfpipe serve dispatcher --port {port}` on {host}"
    if found == "nothing":
        raise DataError(f"no tf.data service dispatcher at {where}: nothing listens there (tried for "
                        f"{timeout:g} s: {detail}); {start}, or fix {flag} (the dispatcher prints its "
                        f"address when it starts)")
    if found == "other":
        raise DataError(f"{where} answers but is not a tf.data service dispatcher ({detail}; e.g. a "
                        f"tf.data service worker's port): set {flag} to the port `tfpipe serve dispatcher` "
                        f"printed, or {start}")
    raise DataError(f"{where} accepts connections but did not answer as a tf.data service dispatcher within "
                    f"{timeout:g} s ({detail}): check {flag} (is that port another program's?), or {start}")


def _ask_dispatcher(host: str, port: int, seconds: float) -> tuple[str, str]:
    """One try: ("dispatcher" | "nothing" | "other" (a gRPC server, not a dispatcher) | "silent", detail)."""
    try:
        socket.create_connection((host, port), timeout=seconds).close()
    except OSError as e:
        return "nothing", e.strerror or str(e) or type(e).__name__
    import grpc  # a TensorFlow dependency; loaded only when a service is used

    # No proxy: the TCP connect above went direct, and a proxy would turn "nothing here" into its answer.
    with grpc.insecure_channel(host_port(host, port), options=[("grpc.enable_http_proxy", 0)]) as channel:
        try:
            channel.unary_unary(_GET_VERSION)(b"", timeout=seconds)  # empty GetVersionRequest
            return "dispatcher", ""
        except grpc.RpcError as e:
            detail = f"gRPC {e.code().name}: {e.details() or 'no details'}"
            return ("other" if e.code() == grpc.StatusCode.UNIMPLEMENTED else "silent"), detail


# --- addresses ---------------------------------------------------------------------------------


def host_port(host: str, port: object) -> str:
    """'host:port', with an IPv6 literal in brackets ('[::1]:5050')."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def split_address(address: str) -> tuple[str, int]:
    """(host, port) from 'HOST:PORT' or 'grpc://HOST:PORT', or ValueError naming the fix."""
    parts = urlsplit(address if "://" in address else f"grpc://{address}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None:
        raise ValueError(f"dispatcher address {address!r}: expected HOST:PORT, e.g. localhost:5050")
    return parts.hostname, port
