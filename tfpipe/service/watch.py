"""Watching a tf.data service's workers from the consumer: a lost worker is said when it happens.

TensorFlow's consumer sees nothing when a worker dies mid-epoch: the examples of the files
that worker held are lost (the service delivers each at most once), the epoch does not end
until a worker is back at that address, and no error or log line says so. The dispatcher
keeps listing a dead worker, so tfpipe asks the dispatcher for its workers (GetWorkers) and
then each worker whether it still accepts connections, every few seconds, in a daemon thread
of the consuming process; a worker that stops answering, and one that comes back, is named
on stderr with what it means and what to do.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from typing import Optional, TextIO

WATCH_SECONDS = 2.0  # between two looks: one GetWorkers call and one TCP connect per worker
GIVE_UP_SECONDS = 60.0  # a dispatcher away this long is no longer watched (it stopped, or moved)
_GET_WORKERS = "/tensorflow.data.DispatcherService/GetWorkers"
_WATCHES: dict[tuple[str, int], "WorkerWatch"] = {}
_LOCK = threading.Lock()


class WorkerWatch:
    """Compares the dispatcher's workers and whether each answers, look after look.

    Attributes:
      host, port: the dispatcher.
      answering: worker address -> whether it accepted a connection at the last look.
    """

    def __init__(self, host: str, port: int, out: Optional[TextIO] = None):
        self.host, self.port = host, port
        self.answering: dict[str, bool] = {}
        self._out = out

    def look(self, workers: Optional[list[str]] = None) -> list[str]:
        """One look: the lines to say (a worker lost or back); [] when nothing changed or the dispatcher is away.

        Args:
          workers: the dispatcher's worker addresses, if already asked for (default: asks it).
        """
        workers = dispatcher_workers(self.host, self.port) if workers is None else workers
        if workers is None:
            return []
        said = []
        for address in workers:
            up = _answers(address)
            before = self.answering.get(address)
            if before and not up:
                said.append(f"tfpipe: tf.data service worker {address} stopped answering (dispatcher "
                            f"{_where(self.host, self.port)}): the examples of the files it was processing are lost "
                            f"for this epoch (the service delivers each at most once), and a finite epoch does not "
                            f"end until a worker is back at {address}: restart it there (tfpipe serve worker "
                            f"--dispatcher {_where(self.host, self.port)} --port {address.rsplit(':', 1)[-1]}); "
                            f"for an exact evaluation read without the service (--data_service='')")
            elif before is False and up:
                said.append(f"tfpipe: tf.data service worker {address} answers again")
            self.answering[address] = up
        return said

    def say_now(self) -> None:
        """One look now, printing what it finds (at the end of an epoch)."""
        for line in self.look():
            print(line, file=self._out or sys.stderr, flush=True)

    def run(self, stop: threading.Event) -> None:
        """Looks every WATCH_SECONDS, printing what each look finds, until `stop` is set or the
        dispatcher has been away for GIVE_UP_SECONDS (the next distribute() watches it again)."""
        away_since = None
        while not stop.wait(WATCH_SECONDS):
            workers = dispatcher_workers(self.host, self.port)
            if workers is None:
                away_since = away_since or time.monotonic()
                if time.monotonic() - away_since > GIVE_UP_SECONDS:
                    break
                continue
            away_since = None
            for line in self.look(workers):
                print(line, file=self._out or sys.stderr, flush=True)
        with _LOCK:
            if _WATCHES.get((self.host, self.port)) is self:
                del _WATCHES[(self.host, self.port)]


def watch(host: str, port: int) -> WorkerWatch:
    """Starts (once per dispatcher and process) the daemon thread that watches its workers."""
    with _LOCK:
        if (host, port) not in _WATCHES:
            found = WorkerWatch(host, port)
            found.look()  # who answers now: the baseline
            threading.Thread(target=found.run, args=(threading.Event(),), daemon=True,
                             name=f"tfpipe-service-watch-{port}").start()
            _WATCHES[(host, port)] = found
        return _WATCHES[(host, port)]


def at_end(ds, fn):
    """`ds`, calling fn() (Python, for its side effect) when its last element has been read.

    A blank element of ds's structure is appended behind a map that calls fn and a filter that
    drops it, so consumers see exactly ds's elements. Datasets of other than plain tensors
    (ragged, sparse) are returned as they are.
    """
    import tensorflow as tf

    specs = tf.nest.flatten(ds.element_spec)
    if not all(isinstance(s, tf.TensorSpec) for s in specs):
        return ds
    blank = tf.nest.map_structure(lambda s: tf.zeros([d or 0 for d in s.shape], s.dtype), ds.element_spec)

    def call(*element):
        done = tf.py_function(lambda: fn() or 0, [], tf.int32)
        with tf.control_dependencies([done]):
            return tf.nest.map_structure(tf.identity, element if len(element) > 1 else element[0])

    tail = tf.data.Dataset.from_tensors(blank).map(call).filter(lambda *element: False)
    return ds.concatenate(tail)


def dispatcher_workers(host: str, port: int, seconds: float = 2.0) -> Optional[list[str]]:
    """The worker addresses the dispatcher lists (live or not), or None when it does not answer."""
    import grpc  # a TensorFlow dependency

    with grpc.insecure_channel(_where(host, port), options=[("grpc.enable_http_proxy", 0)]) as channel:
        try:
            raw = channel.unary_unary(_GET_WORKERS)(b"", timeout=seconds)  # empty GetWorkersRequest
        except grpc.RpcError:
            return None
    return [info.get(1, b"").decode() for info in map(_fields, _fields(raw, repeated=1))]


def _fields(raw: bytes, repeated: int = 0):
    """A protobuf message's length-delimited fields: {number: bytes}, or the list of field `repeated`.

    GetWorkersResponse is `repeated WorkerInfo workers = 1`, WorkerInfo `string address = 1`;
    TensorFlow ships no Python module for these messages, and they need no more than this.
    """
    found, listed, i = {}, [], 0
    while i < len(raw):
        tag, i = _varint(raw, i)
        number, kind = tag >> 3, tag & 7
        if kind == 0:
            _, i = _varint(raw, i)
            continue
        if kind != 2:
            break  # fixed-width fields: none in these messages
        size, i = _varint(raw, i)
        value, i = raw[i:i + size], i + size
        found[number] = value
        if number == repeated:
            listed.append(value)
    return listed if repeated else found


def _varint(raw: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while i < len(raw):
        byte = raw[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    return value, i


def accepts_connections(host: str, port: int, seconds: float = 1.0) -> bool:
    """True if a TCP connection to host:port succeeds within `seconds`."""
    try:
        with socket.create_connection((host, port), timeout=seconds):
            return True
    except OSError:
        return False


def _answers(address: str) -> bool:
    host, _, port = address.rpartition(":")
    return port.isdigit() and accepts_connections(host.strip("[]"), int(port))


def _where(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

