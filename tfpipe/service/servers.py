"""tf.data service, the servers: a dispatcher and workers, in this process (`start_*`) or run until
Ctrl-C / SIGTERM with status lines (`run_*`, behind `tfpipe serve dispatcher | worker`).

The service has no authentication and its servers listen on every interface of
the host (TF 2.15 has no bind-address option): run it on a trusted network only.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from typing import Any, Callable, Optional, TextIO

import tensorflow as tf

from tfpipe.service import watch as service_watch
from tfpipe.service.client import check_dispatcher, host_port, split_address
from tfpipe.service.ports import check_port_free

_service = tf.data.experimental.service
_LOOPBACK = ("localhost", "127.0.0.1", "::1")  # hostnames as urlsplit gives them (no brackets)


def start_dispatcher(port: int = 0, work_dir: Optional[str] = None, *, worker_timeout_ms: Optional[int] = None,
                     notice: bool = True) -> _service.DispatchServer:
    """Starts a dispatcher in this process and returns it (`.target` is its grpc:// address).

    Args:
      port: port to listen on (0: any free port). The server listens on all interfaces.
      work_dir: if set, the dispatcher journals its state there and recovers it
        after a restart (fault-tolerant mode).
      worker_timeout_ms: how long a silent worker counts as alive (None: TensorFlow's default).
      notice: say on stderr that the port is open on every interface (run_* say it in their status).

    Raises:
      ValueError: `port` is taken (gRPC would share it silently; see tfpipe.service.ports.check_port_free).
    """
    check_port_free(port)
    if work_dir:
        os.makedirs(work_dir, exist_ok=True)
    config = _service.DispatcherConfig(port=port, work_dir=work_dir or None,
                                       fault_tolerant_mode=bool(work_dir),
                                       worker_timeout_ms=worker_timeout_ms)
    server = _service.DispatchServer(config)
    if notice:
        open_port_notice("dispatcher", server.target.rsplit(":", 1)[-1])
    return server


def open_port_notice(kind: str, port: Any) -> None:
    """One stderr line: this server's port is open on every interface, without authentication.

    TensorFlow 2.15's servers bind [::] with no option for one address (also for `tfpipe serve
    bench`, whose cluster is all on this host), so the one thing tfpipe can do is say so.
    """
    print(f"tfpipe: the tf.data service {kind} listens on port {port} on ALL network interfaces, with no "
          f"authentication (TensorFlow 2.15 cannot bind one address): anyone who reaches this host can use "
          f"it; keep it on a trusted network or behind a firewall", file=sys.stderr, flush=True)


def start_worker(dispatcher_address: str, port: int = 0, *, worker_host: Optional[str] = None,
                 notice: bool = True) -> _service.WorkerServer:
    """Starts a worker in this process that registers with the dispatcher.

    Args:
      dispatcher_address: "HOST:PORT" (or "grpc://HOST:PORT") of the dispatcher.
      port: port to listen on (0: any free port). The server listens on all interfaces.
      worker_host: the name consumers use to reach this worker; default: "localhost"
        when the dispatcher is on this host, else this machine's hostname.
      notice: say on stderr that the port is open on every interface (run_* say it in their status).

    Raises:
      ValueError: a malformed address, or `port` is taken.
    """
    host, dispatcher_port = split_address(dispatcher_address)
    check_port_free(port)
    config = _service.WorkerConfig(dispatcher_address=host_port(host, dispatcher_port),
                                   worker_address=host_port(_worker_host(host, worker_host), "%port%"),
                                   port=port)
    server = _service.WorkerServer(config)
    if notice:
        open_port_notice("worker", server._address.rsplit(":", 1)[-1])  # pylint: disable=protected-access
    return server


def _worker_host(dispatcher_host: str, worker_host: Optional[str]) -> str:
    """The name a worker gives consumers: "localhost" would send remote consumers to themselves."""
    return worker_host or ("localhost" if dispatcher_host in _LOOPBACK else socket.gethostname())


def run_dispatcher(port: int, work_dir: Optional[str] = None, *, worker_timeout_ms: Optional[int] = None,
                   out: Optional[TextIO] = None, stop: Optional[threading.Event] = None) -> None:
    """Runs a dispatcher until Ctrl-C / SIGTERM (or `stop` is set), printing how to connect.

    Args:
      port: port to listen on (0: any free port; the status line names it).
      work_dir: journal folder for restart recovery (see start_dispatcher).
      worker_timeout_ms: how long a silent worker counts as alive.
      out: where the status lines go (default stdout).
      stop: set it to stop the server (for callers that run this in a thread).

    Raises:
      ValueError: `port` is taken.
    """

    def status(server: _service.DispatchServer) -> list[str]:
        bound, host = int(server.target.rsplit(":", 1)[1]), socket.gethostname()
        return [f"tfpipe dispatcher: port {bound} (all interfaces), pid {os.getpid()}"
                + (f", state journal {work_dir}" if work_dir else ""),
                f"  workers:   tfpipe serve worker --dispatcher {host}:{bound} --port PORT",
                f"  consumers: --data_service=grpc://{host}:{bound}   "
                f"(on this machine: --data_service=grpc://localhost:{bound})",
                _NO_AUTH]

    _serve(lambda: start_dispatcher(port, work_dir, worker_timeout_ms=worker_timeout_ms, notice=False), status, out,
           stop)


def run_worker(dispatcher_address: str, port: int, *, worker_host: Optional[str] = None,
               out: Optional[TextIO] = None, stop: Optional[threading.Event] = None) -> None:
    """Runs a worker until Ctrl-C / SIGTERM (or `stop` is set), printing its address.

    Waits (interruptibly) for the dispatcher to accept connections first, then checks that
    a dispatcher answers there: TensorFlow's worker start blocks, deaf to Ctrl-C, until it has
    registered, so it must only start once one does.

    Args:
      dispatcher_address: "HOST:PORT" of the dispatcher.
      port: port to listen on (0: any free port).
      worker_host: the name consumers use to reach this worker (see start_worker).
      out: where the status lines go (default stdout).
      stop: set it to stop the server.

    Raises:
      ValueError: `port` is taken or the address is malformed.
      DataError: something other than a dispatcher answers at `dispatcher_address`.
    """
    host, dispatcher_port = split_address(dispatcher_address)
    check_port_free(port)  # before waiting: a taken port would fail only after the dispatcher is up

    def wait_for_dispatcher(stopping: threading.Event) -> None:
        if not service_watch.accepts_connections(host, dispatcher_port):
            print(f"tfpipe worker: waiting for the dispatcher at {host_port(host, dispatcher_port)} "
                  f"(nothing listens there yet; Ctrl-C stops)", file=out, flush=True)
            while not service_watch.accepts_connections(host, dispatcher_port):
                if stopping.wait(0.5):
                    return
        # Something listens: it must answer as a dispatcher, else TensorFlow's start would hang for good.
        check_dispatcher(dispatcher_address, flag="--dispatcher", stop=stopping)

    def status(server: _service.WorkerServer) -> list[str]:
        bound = server._server.bound_port()  # pylint: disable=protected-access
        advertised = host_port(_worker_host(host, worker_host), bound)
        dispatcher = host_port(host, dispatcher_port)
        return [f"tfpipe worker: port {bound} (all interfaces), pid {os.getpid()}, registered with "
                f"dispatcher {dispatcher}; consumers fetch from {advertised}", _NO_AUTH]

    _serve(lambda: start_worker(dispatcher_address, port, worker_host=worker_host, notice=False), status, out, stop,
           before=wait_for_dispatcher)


_NO_AUTH = "  no authentication: keep this port reachable from a trusted network only. Ctrl-C stops."


def _serve(start: Callable[[], Any], status: Callable[[Any], list[str]], out: Optional[TextIO],
           stop: Optional[threading.Event],
           before: Optional[Callable[[threading.Event], None]] = None) -> None:
    """Starts a server, prints its status, waits for Ctrl-C / SIGTERM / `stop`, then stops it."""
    stop = stop or threading.Event()
    restore = _stop_on_signals(stop.set)
    server = None
    try:
        if before:
            before(stop)
        if not stop.is_set():
            server = start()
            print("\n".join(status(server)), file=out, flush=True)
        while not stop.wait(0.5):  # short waits keep the main thread responsive to signals
            pass
    finally:
        if server is not None:
            server.stop()
        restore()
    print("stopped", file=out, flush=True)  # not after an error: that is reported instead


def _stop_on_signals(callback: Callable[[], None]) -> Callable[[], None]:
    """Calls `callback` on SIGINT/SIGTERM (main thread only); returns what restores the old handlers."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    old = {sig: signal.signal(sig, lambda *_: callback()) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)

    return restore
