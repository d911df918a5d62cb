"""Ctrl-C that always stops: also when the main thread is blocked inside TensorFlow.

Python runs a SIGINT handler only when the main thread executes Python code. A main thread
waiting in a tf.data iterator for a map function that hangs (a python_fn stuck on a lock or a
network call) never does, so Ctrl-C is ignored. `install()` has the interpreter's C-level
signal handler also write to a pipe (signal.set_wakeup_fd), which a watchdog thread reads:
after a Ctrl-C the process gets `grace_s` seconds to stop the usual way (KeyboardInterrupt),
then it exits with status 130, saying why. A second Ctrl-C exits at once. Every `tfpipe`
command installs it; call `tfpipe.interrupt.install()` in your own script for the same.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

_installed = threading.Event()


def install(grace_s: float = 5.0) -> None:
    """Makes Ctrl-C stop the process within `grace_s` seconds (call from the main thread, once is enough)."""
    if _installed.is_set() or threading.current_thread() is not threading.main_thread():
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    try:
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except ValueError:  # not the main thread of the main interpreter
        os.close(read_fd)
        os.close(write_fd)
        return
    _installed.set()
    threading.Thread(target=_watch, args=(read_fd, grace_s), name="tfpipe-interrupt", daemon=True).start()


def _watch(read_fd: int, grace_s: float) -> None:
    first = None
    while True:
        caught = os.read(read_fd, 1)
        if not caught or caught[0] != signal.SIGINT:
            continue
        if first is not None:
            _exit("a second Ctrl-C")
        first = time.monotonic()
        threading.Thread(target=_deadline, args=(grace_s,), daemon=True).start()


def _deadline(grace_s: float) -> None:
    time.sleep(grace_s)  # the process is still here: the main thread did not get to handle Ctrl-C
    _exit(f"Ctrl-C, and the main thread did not stop within {grace_s:g} s (it waits inside TensorFlow, e.g. "
          f"for a map function that hangs; a python_fn can have a deadline: timeout_s=)")


def _exit(why: str) -> None:
    print(f"\ntfpipe: stopped after {why}", file=sys.stderr, flush=True)
    os._exit(130)
