"""python_fn: numpy code in a chain, whose failures name the function and the file."""

import re
import time

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.core.python_fn import python_fn
from tfpipe.errors import DataError


def _files(tmp_path, n=6):
    paths = []
    for i in range(n):
        path = tmp_path / f"f{i}.txt"
        path.write_text(str(i))
        paths.append(str(path))
    return paths


def _values(paths, fn, **kwargs):
    ds = tfpipe.build_dataset((paths, [0] * len(paths)), "eval", tfpipe.PipelineConfig.optimized(batch_size=2),
                              read=fn, **kwargs)
    return [float(v) for f, _ in ds.as_numpy_iterator() for v in f["v"]]


def _reader(fail_on="", sleep_on="", result=lambda text: np.float32(text)):
    def read_text(path, label):
        name = path.decode()
        if name.endswith(fail_on or "\0"):
            raise OSError(f"cannot parse {name}")
        if name.endswith(sleep_on or "\0"):
            time.sleep(60)
        return {"v": result(open(name).read())}, label

    return read_text


def _python_read(fn, spec=tf.TensorSpec([], tf.float32), **kwargs):
    wrapped = python_fn(lambda path, label: fn(path, label)[0]["v"], spec, name="read_text", **kwargs)
    return lambda path, label: ({"v": wrapped(path, label)}, label)


def test_a_python_fn_that_works_gives_the_same_values_eagerly_and_in_a_map(tmp_path):
    paths = _files(tmp_path)
    assert _values(paths, _python_read(_reader())) == [0, 1, 2, 3, 4, 5]


def test_a_failure_names_the_function_and_the_file(tmp_path):
    paths = _files(tmp_path)
    with pytest.raises(tf.errors.OpError, match=r"python_fn read_text failed on input \('.*f3.txt', 0\): "
                                                r"OSError: cannot parse .*f3.txt"):
        _values(paths, _python_read(_reader(fail_on="f3.txt")))


@pytest.mark.parametrize("result,spec,message", [
    (lambda text: "x", tf.TensorSpec([], tf.float32), r"returned <U1\[\] .*output_signature says float32"),
    (lambda text: np.zeros([2], np.float32), tf.TensorSpec([], tf.float32), r"returned shape \[2\] .*says \(\)"),
])
def test_a_result_that_does_not_fit_the_signature_is_named(tmp_path, result, spec, message):
    paths = _files(tmp_path, 2)
    with pytest.raises(tf.errors.OpError, match=r"python_fn read_text " + message):
        _values(paths, _python_read(_reader(result=result), spec))


def test_a_hung_call_fails_at_its_deadline_naming_the_function_and_the_file(tmp_path):
    paths = _files(tmp_path, 3)
    with pytest.raises(tf.errors.OpError, match=r"python_fn read_text did not return within timeout_s=1 s on "
                                                r"input \('.*f1.txt', 0\)"):
        _values(paths, _python_read(_reader(sleep_on="f1.txt"), timeout_s=1))
    with pytest.raises(ValueError, match=r"timeout_s=0\): must be a positive number"):
        python_fn(len, tf.TensorSpec([], tf.float32), timeout_s=0)


def test_describe_shows_paths_as_text_and_arrays_by_dtype_and_shape():
    from tfpipe.core.python_fn import describe

    assert describe([b"/data/a.wav", np.zeros([3, 4], np.float32), np.int64(7)]) == "('/data/a.wav', float32[3, 4], 7)"


def test_a_bad_output_signature_is_refused_at_once():
    with pytest.raises(ValueError, match=r"python_fn\('len'\): output_signature must be a tf.TensorSpec"):
        python_fn(len, [tf.float32])
    with pytest.raises(DataError):
        raise DataError("DataError is a ValueError")  # the type python_fn raises inside the map


def test_a_snapshot_is_keyed_on_the_functions_code(tmp_path):
    # The same chain with a python_fn whose code changed (same name) must not be served the old snapshot.
    paths = _files(tmp_path, 4)
    pipe = tfpipe.PipelineConfig.optimized(batch_size=2, cache=f"snapshot:{tmp_path / 'snap'}")

    def read(scale):
        def read_text(path, label):
            return {"v": np.float32(open(path.decode()).read()) * scale}, label
        return _python_read(read_text)

    def values(fn):
        ds = tfpipe.build_dataset((paths, [0] * 4), "eval", pipe, read=fn)
        return sorted(float(v) for f, _ in ds.as_numpy_iterator() for v in f["v"])

    assert values(read(1)) == [0, 1, 2, 3]
    assert values(read(1)) == [0, 1, 2, 3]  # the same code: the snapshot serves it
    assert values(read(1000)) == [0, 1000, 2000, 3000]  # other code: a new snapshot, not the old values
    from tfpipe.core.python_fn import code_key
    assert code_key(read(1)) == code_key(read(1)) != code_key(read(1000))


def test_a_call_running_long_without_a_deadline_is_named_once_a_minute(tmp_path, monkeypatch, capfd):
    from tfpipe.core import python_fn as module

    monkeypatch.setattr(module._Running, "NOTE_AFTER_S", 0.3)
    paths = _files(tmp_path, 2)

    def slow(path, label):
        time.sleep(1.5)
        return {"v": np.float32(open(path.decode()).read())}, label

    assert _values(paths, _python_read(slow)) == [0.0, 1.0]
    assert re.search(r"tfpipe: python_fn read_text has been running \d+ s on input \('.*f[01].txt', 0\)",
                     capfd.readouterr().err)
