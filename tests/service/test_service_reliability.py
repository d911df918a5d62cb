"""tf.data service faults: a wrong dispatcher address or a taken port fails fast with the fix, never hangs.

Everything runs against real servers and real sockets on 127.0.0.1. The hangs these tests guard
against block inside TensorFlow's C++ (deaf to signals), so the blocking calls run in subprocesses
with a hard timeout: on a regression the test fails instead of hanging the suite.
"""

import contextlib
import http.server
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from tfpipe.service import client as service
from tfpipe.service import servers
from tfpipe.errors import DataError
from tfpipe.service.bench import free_ports
from tests.support import SAYS_IF_TF_LOADED

CLI = [sys.executable, "-m", "tfpipe.cli", "serve"]
WAIT = 2  # seconds the subprocesses wait for a dispatcher ($TFPIPE_DISPATCHER_WAIT_SECONDS; 10 by default)
ENV = {**os.environ, "TFPIPE_DISPATCHER_WAIT_SECONDS": str(WAIT)}


@contextlib.contextmanager
def silent_listener():
    """A plain TCP socket listening on 127.0.0.1 that accepts connections and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@contextlib.contextmanager
def http_server():
    """An HTTP/1 server on 127.0.0.1 (it answers, but not gRPC)."""
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def dispatcher():
    """A real dispatcher and worker in this process; yields the dispatcher (port: int(target's tail))."""
    d = servers.start_dispatcher()
    w = servers.start_worker(d.target)
    yield d, w
    w.stop()
    d.stop()


def _port(server):
    return int(server.target.rsplit(":", 1)[1])


def _line_with(proc, text, max_lines=5):
    """The first line of proc's output holding `text` (skipping stray start-up lines), or the last read."""
    for _ in range(max_lines):
        line = proc.stdout.readline()
        if text in line or not line:
            break
    return line


# --- consumers: build_dataset / distribute ---------------------------------------------------

_BUILD = """
import sys, time
import tensorflow  # loaded before the clock starts: its import is not the wait being bounded
from tfpipe import PipelineConfig, build_dataset
from tfpipe.errors import DataError
start = time.monotonic()
try:
    build_dataset(sys.argv[1], "eval", PipelineConfig.optimized(data_service=sys.argv[2]))
except DataError as e:
    print(f"DataError after {time.monotonic() - start:.1f} s: {e}")
    sys.exit(3)
print("built")
"""


def test_build_dataset_with_nothing_at_the_dispatcher_address_fails_in_bounded_time(corpus):
    port = free_ports(1)[0]
    out = subprocess.run([sys.executable, "-c", _BUILD, corpus, f"grpc://127.0.0.1:{port}"],
                         capture_output=True, text=True, timeout=60, env=ENV)  # before: blocked for ever
    assert out.returncode == 3, out.stdout + out.stderr[-2000:]
    waited = float(re.search(r"DataError after ([\d.]+) s", out.stdout).group(1))
    # Bounded, not timed: it gives up after WAIT s of tries, plus the build's own cost (slow when cores are busy).
    assert WAIT <= waited < WAIT + 20 and f"(tried for {WAIT} s" in out.stdout, out.stdout
    assert f"127.0.0.1:{port}: nothing listens there" in out.stdout
    assert f"tfpipe serve dispatcher --port {port}" in out.stdout and "--data_service" in out.stdout


def test_estimator_demo_with_a_wrong_dispatcher_port_stops_with_the_fix(corpus, tmp_path):
    port = free_ports(1)[0]
    out = subprocess.run([sys.executable, "-m", "estimator_demo", "--data", corpus, "--model_dir",
                          str(tmp_path / "m"), "--train_steps", "1", f"--data_service=grpc://127.0.0.1:{port}"],
                         capture_output=True, text=True, timeout=90, env=ENV)  # before: blocked for ever
    assert out.returncode != 0, out.stdout[-2000:]
    assert f"127.0.0.1:{port}: nothing listens there" in out.stderr and "Traceback" not in out.stderr, \
        out.stderr[-3000:]


def test_check_dispatcher_accepts_a_dispatcher_at_once(dispatcher):
    d, _ = dispatcher
    start = time.monotonic()
    service.check_dispatcher(d.target)
    service.check_dispatcher(f"localhost:{_port(d)}")  # without grpc://, as workers are given it
    assert time.monotonic() - start < 5  # at once: well under the 10 s it would keep trying


def test_check_dispatcher_names_a_worker_port_given_as_the_dispatcher(dispatcher):
    _, w = dispatcher
    port = w._server.bound_port()  # pylint: disable=protected-access
    start = time.monotonic()
    with pytest.raises(DataError, match=rf"127\.0\.0\.1:{port} answers but is not a tf\.data service "
                                        rf"dispatcher.*worker.*--data_service"):
        service.check_dispatcher(f"grpc://127.0.0.1:{port}")
    assert time.monotonic() - start < 5  # a definite answer: not the 10 s of tries


@pytest.mark.parametrize("server", [silent_listener, http_server])
def test_check_dispatcher_gives_up_on_a_port_that_is_not_a_dispatcher(server):
    with server() as port:
        start = time.monotonic()
        with pytest.raises(DataError, match=rf"127\.0\.0\.1:{port} accepts connections but did not answer "
                                            rf"as a tf\.data service dispatcher within 2 s"):
            service.check_dispatcher(f"grpc://127.0.0.1:{port}", timeout=2)
        assert time.monotonic() - start < 8  # the 2 s given, with margin for busy cores


def test_distribute_checks_the_dispatcher_after_the_config():
    import tensorflow as tf

    from tfpipe.config import PipelineConfig

    # Servers of its own: a worker that served a job takes ~20 s to stop a minute later (TensorFlow's
    # own wait), which the module's servers would add to the suite.
    d = servers.start_dispatcher()
    w = servers.start_worker(d.target)
    try:
        ds = service.distribute(tf.data.Dataset.range(4), PipelineConfig.optimized(data_service=d.target))
        assert sorted(int(x) for x in ds) == [0, 1, 2, 3]
    finally:
        w.stop()
        d.stop()


# --- workers: tfpipe serve worker --dispatcher ... --------------------------------------------


def test_cli_worker_pointed_at_a_plain_tcp_listener_fails_naming_it():
    with silent_listener() as port:
        start = time.monotonic()
        out = subprocess.run([*CLI, "worker", "--dispatcher", f"127.0.0.1:{port}", "--port", "0"],
                             capture_output=True, text=True, timeout=60, env=ENV)  # before: hung, deaf to signals
        took = time.monotonic() - start
    assert out.returncode == 1, out.stdout + out.stderr
    assert re.search(rf"tfpipe serve: error: .*127\.0\.0\.1:{port} accepts connections but did not answer as a "
                     rf"tf\.data service dispatcher.*--dispatcher", out.stderr), out.stderr
    assert "Traceback" not in out.stderr and took < 45


def test_cli_worker_pointed_at_an_http_server_fails_naming_it():
    with http_server() as port:
        out = subprocess.run([*CLI, "worker", "--dispatcher", f"127.0.0.1:{port}", "--port", "0"],
                             capture_output=True, text=True, timeout=60, env=ENV)
    assert out.returncode == 1 and f"127.0.0.1:{port} accepts connections but did not answer" in out.stderr, \
        out.stdout + out.stderr


def test_cli_worker_waiting_for_its_dispatcher_says_so_and_stops_on_sigterm():
    port = free_ports(1)[0]
    proc = subprocess.Popen([*CLI, "worker", "--dispatcher", f"127.0.0.1:{port}", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = _line_with(proc, "waiting for the dispatcher")
        assert f"waiting for the dispatcher at 127.0.0.1:{port}" in line and "nothing listens" in line, line
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
        assert proc.returncode == 0 and out.strip().endswith("stopped"), out
    finally:
        if proc.poll() is None:
            proc.kill()


# --- split-brain: a port that is already taken -------------------------------------------------


def test_cli_servers_refuse_a_port_that_a_dispatcher_already_uses():
    port = free_ports(1)[0]
    first = subprocess.Popen([*CLI, "dispatcher", "--port", str(port)], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        assert _line_with(first, "tfpipe dispatcher:").startswith(f"tfpipe dispatcher: port {port} ")
        for role in (["dispatcher"], ["worker", "--dispatcher", f"localhost:{port}"]):
            start = time.monotonic()
            out = subprocess.run([sys.executable, "-c", SAYS_IF_TF_LOADED, "serve", *role, "--port", str(port)],
                                 capture_output=True, text=True, timeout=60)  # gRPC alone would share the port
            assert out.returncode == 1, out.stdout + out.stderr
            assert out.stderr.strip().endswith("tensorflow not loaded"), out.stderr  # refused before it loads
            assert re.search(rf"tfpipe serve: error: port {port} is already in use on this host.*pick another "
                             rf"--port.*stop the process", out.stderr), out.stderr
            assert "registered" not in out.stdout and "tfpipe dispatcher: port" not in out.stdout
            assert time.monotonic() - start < 30
        assert first.poll() is None  # the first dispatcher is left alone
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=30)


def test_start_dispatcher_and_start_worker_refuse_a_taken_port(dispatcher):
    d, w = dispatcher
    for port in (_port(d), w._server.bound_port()):  # pylint: disable=protected-access
        with pytest.raises(ValueError, match=rf"port {port} is already in use"):
            servers.start_dispatcher(port)
        with pytest.raises(ValueError, match=rf"port {port} is already in use"):
            servers.start_worker(d.target, port)
    service.check_dispatcher(d.target)  # and the dispatcher is still the one answering there


def test_a_plain_socket_on_the_port_counts_as_taken():
    with silent_listener() as port:
        with pytest.raises(ValueError, match=rf"port {port} is already in use"):
            servers.start_dispatcher(port)


def test_a_free_port_given_explicitly_still_works():
    port = free_ports(1)[0]
    d = servers.start_dispatcher(port)
    try:
        assert _port(d) == port
        service.check_dispatcher(f"localhost:{port}")
    finally:
        d.stop()


def test_every_server_says_its_port_is_open_on_all_interfaces_without_authentication(capfd):
    from tfpipe.service.servers import start_dispatcher, start_worker

    dispatcher = start_dispatcher(0)
    worker = start_worker(dispatcher.target.split("://", 1)[1])
    err = capfd.readouterr().err
    for kind, port in (("dispatcher", dispatcher.target.rsplit(":", 1)[1]), ("worker", worker._address.rsplit(":", 1)[1])):
        assert re.search(rf"tfpipe: the tf.data service {kind} listens on port {port} on ALL network interfaces, "
                         rf"with no authentication", err), err
    worker.stop()
    dispatcher.stop()
