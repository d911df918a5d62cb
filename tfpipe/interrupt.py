"""Ctrl-C that always stops: also when the main thread is blocked inside TensorFlow.

Python runs a SIGINT handler only when the main thread executes Python code. A main thread
waiting in a tf.data iterator for a map function that hangs (a python_fn stuck on a lock or a
network call) never does, so Ctrl-C is ignored. `install()` has the interpreter's C-level
signal handler also write to a pipe (signal.set_wakeup_fd), which a watchdog thread reads:
after a Ctrl-C the process gets `grace_s` seconds to stop the usual way (KeyboardInterrupt),
then it exits with status 130, saying why. A second Ctrl-C exits at once. Once the interpreter
is shutting down no Python thread runs, so an exit that then waits (a TensorFlow iterator's
destructor waiting on a hung map call) would outlast both; faulthandler's C thread ends it
`_BACKSTOP_S` later (status 1, with every thread's traceback), armed by the SIGINT handler in
the main thread before KeyboardInterrupt unwinds, or by the watchdog. Every `tfpipe` command installs
it; call `tfpipe.interrupt.install()` in your own script for the same.
"""

from __future__ import annotations

import faulthandler
import functools
import os
import signal
import sys
import threading
import time

_installed = threading.Event()
_BACKSTOP_S = 2.0  # after the grace: faulthandler's deadline, which needs no Python thread


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
    previous = signal.getsignal(signal.SIGINT)
    if callable(previous):  # Python's own (KeyboardInterrupt) or the script's: kept, run after ours
        signal.signal(signal.SIGINT, functools.partial(_on_sigint, previous, grace_s))
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
        _arm_backstop(grace_s + _BACKSTOP_S)
        threading.Thread(target=_deadline, args=(grace_s,), daemon=True).start()


def _on_sigint(previous, grace_s: float, signum: int, frame) -> None:
    """Ctrl-C in the main thread: the backstop is armed before the exit it may start begins."""
    _arm_backstop(grace_s + _BACKSTOP_S)
    previous(signum, frame)


def _arm_backstop(seconds: float) -> None:
    """Exit (status 1, tracebacks on stderr) after `seconds`, even if no Python thread can run then."""
    try:
        faulthandler.dump_traceback_later(seconds, exit=True, file=sys.__stderr__ or 2)
    except (AttributeError, OSError, RuntimeError, ValueError):  # no usable stderr: still end the process
        faulthandler.dump_traceback_later(seconds, exit=True, file=os.open(os.devnull, os.O_WRONLY))


def _deadline(grace_s: float) -> None:
    time.sleep(grace_s)  # the process is still here: the main thread did not get to handle Ctrl-C
    _exit(f"Ctrl-C, and the main thread did not stop within {grace_s:g} s (it waits inside TensorFlow, e.g. "
          f"for a map function that hangs; a python_fn can have a deadline: timeout_s=)")


def _exit(why: str) -> None:
    print(f"\ntfpipe: stopped after {why}", file=sys.stderr, flush=True)
    os._exit(130)
