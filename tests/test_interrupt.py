"""Ctrl-C stops a process whose main thread waits inside TensorFlow for a map function that hangs."""

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
    time.sleep(3600)  # a python_fn stuck on a lock or a network call
    return x
ds = tf.data.Dataset.range(4).map(tfpipe.python_fn(hang, tf.TensorSpec([], tf.int64)))
print("waiting", flush=True)
next(iter(ds))
"""


def _run(tmp_path, install):
    script = tmp_path / "hung.py"
    script.write_text(HUNG.format(install="interrupt.install(grace_s=1)" if install else ""))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "waiting"
    time.sleep(1)  # inside next(): the main thread waits in TensorFlow's C++ iterator
    proc.send_signal(signal.SIGINT)
    return proc


def test_ctrl_c_stops_a_process_blocked_in_a_hung_map_function(tmp_path):
    proc = _run(tmp_path, install=True)
    _, err = proc.communicate(timeout=60)  # bounded: the grace is 1 s
    assert proc.returncode == 130
    assert "tfpipe: stopped after Ctrl-C, and the main thread did not stop within 1 s" in err


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
