"""storage/formats.py: v1 and v2 records, block sizes, and one shard's records read with the shard named."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.storage.codec import RecordCodec
from tfpipe.storage.schema import Field
from tfpipe.storage.formats import BLOCK, EXAMPLE, checked_records, get_format

from tests.support import make_corpus

FEAT = tfpipe.AudioConfig(clip_seconds=0.25)


def test_block_size_is_a_mebibyte_of_values_at_most_256_examples_and_the_shard():
    block = get_format(BLOCK)
    codec = RecordCodec({"x": Field("float32", (64, 64))})  # 16 KiB an example
    assert block.block_size(codec, 10_000) == 64 and block.block_size(codec, 10) == 10
    assert block.block_size(RecordCodec({"x": Field("int8", ())}), 10_000) == 256
    variable = RecordCodec({"t": Field("int64", (None,))})
    assert block.block_size(variable, 10_000, example_bytes=100_000) == 10  # by the mean example's bytes
    assert get_format(EXAMPLE).block_size(codec, 10_000) == 1
    with pytest.raises(ValueError, match=r"format='v3': known formats are 'tfrecord-example', 'tfrecord-block'"):
        get_format("v3")


def test_block_shards_read_the_same_examples_as_one_example_records(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", per_class=6)
    v1 = tfpipe.write_shards(corpus, tmp_path / "v1", num_shards=3, num_workers=0, features=FEAT,
                             format="tfrecord-example", progress=False)
    v2 = tfpipe.write_shards(corpus, tmp_path / "v2", num_shards=3, num_workers=0, features=FEAT, progress=False)
    assert [s["num_records"] for s in v1["shards"]] == [6, 6, 6]
    assert [s["num_records"] for s in v2["shards"]] == [1, 1, 1] and v2["shards"][0]["block_size"] == 6
    assert [s["class_counts"] for s in v1["shards"]] == [s["class_counts"] for s in v2["shards"]]
    pipe = tfpipe.PipelineConfig.optimized(batch_size=5, parallel_reads=False)
    a = [(x["log_mel"].numpy(), y.numpy()) for x, y in tfpipe.build_dataset(tmp_path / "v1", "eval", pipe)]
    b = [(x["log_mel"].numpy(), y.numpy()) for x, y in tfpipe.build_dataset(tmp_path / "v2", "eval", pipe)]
    np.testing.assert_array_equal(np.concatenate([x for x, _ in a]), np.concatenate([x for x, _ in b]))
    np.testing.assert_array_equal(np.concatenate([y for _, y in a]), np.concatenate([y for _, y in b]))
    assert a[0][0].dtype == np.float32


def _records(path, n):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in range(n):
            writer.write(b"record %d " % i * 20)
    return str(path)


def test_checked_records_yield_positions_and_records_and_name_a_damaged_or_longer_shard(tmp_path):
    path = _records(tmp_path / "s.tfrecord", 5)
    assert [(int(i), r.numpy()[:9]) for i, r in checked_records(path, 5)] == [(i, b"record %d " % i) for i in range(5)]
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"s.tfrecord: more records than tfpipe.json lists"):
        list(checked_records(path, 4))
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF  # a flipped bit in record 2's data: its CRC fails
    open(path, "wb").write(bytes(data))
    got = []
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"s.tfrecord: cannot be read to the end: fewer readable"):
        for i, _ in checked_records(path, 5):
            got.append(int(i))
    assert got == [0, 1]  # the records before the damaged one, then the named error


_READ = """
import sys, time
import tensorflow as tf
from tfpipe.storage.formats import checked_records
start = time.monotonic()
try:
    for _ in checked_records(sys.argv[1], int(sys.argv[2])):
        pass
    print("no error")
except tf.errors.InvalidArgumentError as e:
    print(f"after {time.monotonic() - start:.1f} s: " + e.message.splitlines()[0])
"""


@pytest.mark.parametrize("how, reason", [
    ("removed", "shard missing: removed after the dataset was built"),
    ("looping_link", "shard missing: removed after the dataset was built"),
    pytest.param("chmod_000", "cannot be read to the end", marks=pytest.mark.skipif(
        os.geteuid() == 0, reason="root reads a chmod 000 file")),
])
def test_a_shard_that_cannot_be_opened_ends_in_a_named_error_not_a_spin(tmp_path, how, reason):
    # TFRecordDataset(...).ignore_errors() retries a failed open for ever, deaf to Ctrl-C: in a
    # subprocess, so that a regression fails this test instead of hanging the suite.
    path = str(tmp_path / "train-00000-of-00001.tfrecord")
    if how == "looping_link":
        os.symlink(os.path.basename(path), path)
    elif how == "chmod_000":
        os.chmod(_records(path, 3), 0)
    out = subprocess.run([sys.executable, "-c", _READ, path, "100000"], capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"{path}: {reason}" in out.stdout, out.stdout
