"""Ctrl-C stops a process whose main thread waits inside TensorFlow for a map function that hangs,
and one whose exit waits in a destructor (no Python thread runs then)."""

import re
import signal
import subprocess
import sys
import time

HUNG = """
import sys, time
import tensorflow as tf
import tfpipe
from tfpipe import interrupt
{install}
def hang(x):
    print("waiting", flush=True)  # called by next(): the main thread waits in TensorFlow's C++ iterator
    time.sleep(3600)  # a python_fn stuck on a lock or a network call
    return x
ds = tf.data.Dataset.range(4).map(tfpipe.python_fn(hang, tf.TensorSpec([], tf.int64)))
next(iter(ds))
"""


# The main thread takes Ctrl-C (KeyboardInterrupt) at once, but the exit then waits in a
# destructor, after the interpreter has stopped running its other threads.
EXIT_WAITS = """
import time
from tfpipe import interrupt
interrupt.install(grace_s=1)


class Teardown:
    def __del__(self):
        time.sleep(3600)  # as a TensorFlow iterator's destructor waits for a map call that hangs


keep = Teardown()
print("waiting", flush=True)
time.sleep(3600)
"""


def _run(tmp_path, install, script_text=None):
    script = tmp_path / "hung.py"
    script.write_text(script_text or HUNG.format(install="interrupt.install(grace_s=1)" if install else ""))
    # Ctrl-C as a terminal delivers it: a suite started in the background of a script inherits an
    # ignored SIGINT, which Python (and tfpipe) then rightly leave ignored.
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout.readline().startswith("waiting")  # a parallel map may call hang twice at once
    time.sleep(0.5)  # EXIT_WAITS: in its last sleep; HUNG: in the map call, where it printed
    proc.send_signal(signal.SIGINT)
    return proc


def _stopped(proc):
    """(returncode, stderr) once it ends; a process still there after 60 s is killed and its signal state said."""
    try:
        _, err = proc.communicate(timeout=60)  # bounded: the grace is 1 s
    except subprocess.TimeoutExpired:
        with open(f"/proc/{proc.pid}/status") as f:
            state = [line for line in f if line.startswith(("Threads", "Sig", "ShdPnd"))]
        proc.kill()
        proc.communicate()
        raise AssertionError(f"still running 60 s after Ctrl-C: {''.join(state)}")
    return proc.returncode, err


def test_ctrl_c_stops_a_process_blocked_in_a_hung_map_function(tmp_path):
    returncode, err = _stopped(_run(tmp_path, install=True))
    assert returncode == 130
    assert "tfpipe: stopped after Ctrl-C, and the main thread did not stop within 1 s" in err


def test_ctrl_c_stops_a_process_whose_exit_waits_in_a_destructor(tmp_path):
    returncode, err = _stopped(_run(tmp_path, install=True, script_text=EXIT_WAITS))
    assert returncode == 1  # faulthandler's exit: no Python thread could say more
    assert "KeyboardInterrupt" in err and "Timeout (0:00:03)!" in err
    assert re.search(r'hung\.py", line \d+ in __del__', err)  # where it waited, for the person who pressed Ctrl-C


def test_without_it_the_same_process_ignores_ctrl_c(tmp_path):
    proc = _run(tmp_path, install=False)
    try:
        proc.wait(timeout=5)
        ignored = False
    except subprocess.TimeoutExpired:
        ignored = True
    finally:
        proc.kill()
        proc.communicate()
    assert ignored  # what every tfpipe command and interrupt.install() users no longer meet
