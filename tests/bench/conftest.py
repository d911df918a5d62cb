"""Fixtures of the bench tests: one tiny wav corpus, its shards and a user's pipeline file, made once."""

import pytest

from tests.support import make_corpus
from tfpipe.domains.audio.config import AudioConfig

FEAT = AudioConfig(clip_seconds=0.25)

# The seed question's functions (read bytes, decode_wav, post-process), written to a .py file the
# way a user keeps them; dataset_fn builds the seed's chain from the PipelineConfig it is handed.
USER_PIPELINE = '''
import glob
import os
import time

import tensorflow as tf

DATA = {data!r}


def _read_wav(filename, label):
    wav, _ = tf.audio.decode_wav(tf.io.read_file(filename), desired_channels=1)
    return tf.squeeze(wav, -1), label


def _post_process(wav, label):
    return tf.math.log(tf.abs(tf.signal.stft(wav, frame_length=400, frame_step=160)) + 1e-6), label


def _files():
    files = sorted(glob.glob(os.path.join(DATA, "*", "*.wav")))
    classes = sorted({{os.path.basename(os.path.dirname(f)) for f in files}})
    return files, [classes.index(os.path.basename(os.path.dirname(f))) for f in files]


def dataset_fn(pipeline, mode):
    files, labels = _files()
    ds = tf.data.Dataset.from_tensor_slices((files, labels))
    calls = tf.data.AUTOTUNE if pipeline.parallel_map else None
    if pipeline.repeat_before_shuffle:
        ds = ds.repeat()
    if pipeline.fuse_maps:
        ds = ds.shuffle(len(files)).map(lambda f, l: _post_process(*_read_wav(f, l)), num_parallel_calls=calls,
                                        name="read_and_post")
    else:
        ds = ds.map(_read_wav, num_parallel_calls=calls, name="read").shuffle(len(files))
        ds = ds.map(_post_process, num_parallel_calls=calls, name="post")
    ds = ds.map(lambda spec, label: ({{"spec": spec}}, label)).batch(pipeline.batch_size, drop_remainder=True)
    if not pipeline.repeat_before_shuffle:
        ds = ds.repeat()
    return ds.prefetch(tf.data.AUTOTUNE) if pipeline.prefetch else ds


def _sleep(x):
    time.sleep(0.002)
    return x


def slow_fn(pipeline, mode):
    calls = tf.data.AUTOTUNE if pipeline.parallel_map else None
    ds = tf.data.Dataset.range(10_000).repeat()
    ds = ds.map(lambda x: tf.py_function(_sleep, [x], tf.int64), num_parallel_calls=calls, name="slow")
    return ds.map(lambda x: (tf.fill([16], x), x % 3), name="fast").batch(pipeline.batch_size)


def broken_fn(pipeline, mode):
    files, labels = _files()
    return tf.data.Dataset.from_tensor_slices(files).batch(pipeline.batch_size // 0)


def input_fn_a(params):  # Estimator style: the batch size comes in params
    files, labels = _files()
    ds = tf.data.Dataset.from_tensor_slices((files, labels)).repeat()
    return ds.map(_read_wav).map(_post_process).batch(params["batch_size"], drop_remainder=True)


def input_fn_b():  # no arguments, its own batch size, one epoch only
    files, labels = _files()
    return tf.data.Dataset.from_tensor_slices((files, labels)).map(_read_wav).batch(3, drop_remainder=True)


def varlen_input_fn(params):  # examples of 1 to 5 values (1, 2, ...), padded per batch; no options set
    ds = tf.data.Dataset.range(100).repeat().map(lambda x: (tf.range(1, x % 5 + 2), x % 2), name="varlen")
    return ds.padded_batch(params["batch_size"])


def input_fn_tensors(mode, params, config):  # the seed's graph-mode habit: tensors, not a Dataset
    return {{"wav": tf.zeros([2])}}, tf.zeros([2])
'''


@pytest.fixture(scope="package")
def tiny(tmp_path_factory):
    """18 clips of 0.25 s, 3 classes."""
    return make_corpus(tmp_path_factory.mktemp("bench") / "corpus", per_class=6)


@pytest.fixture(scope="package")
def tiny_shards(tiny, tmp_path_factory):
    """`tiny` as v2 shards (2 files), written with clip_seconds=0.25."""
    import tfpipe

    shard_dir = str(tmp_path_factory.mktemp("bench") / "shards")
    tfpipe.write_shards(tiny, shard_dir, num_shards=2, num_workers=0, features=FEAT, progress=False)
    return shard_dir


@pytest.fixture(scope="package")
def user_file(tiny, tmp_path_factory):
    """USER_PIPELINE over `tiny`, as a user's my_pipeline.py."""
    path = tmp_path_factory.mktemp("user") / "my_pipeline.py"
    path.write_text(USER_PIPELINE.format(data=tiny))
    return str(path)
