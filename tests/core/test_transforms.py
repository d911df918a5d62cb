"""The transformations the chain's steps are made of, on tiny datasets."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from tfpipe.core.stage import Stage
from tfpipe.core.transforms import apply_stage, batch, permute_window, shard_for_input_context


def _examples(lengths):
    return tf.data.Dataset.from_generator(lambda: ((np.ones([n], np.float32), np.int64(n)) for n in lengths),
                                          output_signature=(tf.TensorSpec([None], tf.float32),
                                                            tf.TensorSpec([], tf.int64)))


def test_batch_pads_only_examples_that_differ_and_buckets_by_length():
    fixed = tf.data.Dataset.from_tensor_slices((np.zeros([5, 3], np.float32), np.arange(5)))
    assert [b[0].shape for b in batch(fixed, 2, drop_remainder=False)] == [(2, 3), (2, 3), (1, 3)]
    padded = [b[0].shape for b in batch(_examples([1, 9, 2, 3]), 2, drop_remainder=False)]
    assert padded == [(2, 9), (2, 3)]
    features = _examples([1, 9, 2, 8]).map(lambda x, n: ({"x": x}, n))
    by_length = [sorted(b[1].numpy().tolist()) for b in batch(features, 2, False, bucket_boundaries=(5,))]
    assert sorted(by_length) == [[1, 2], [8, 9]]


def test_a_window_permutation_keeps_every_example_and_moves_them_together():
    window = (tf.range(10), tf.range(10) * 10)
    a, b = permute_window(seed=1)(*window)
    assert sorted(a.numpy().tolist()) == list(range(10)) and (b.numpy() == a.numpy() * 10).all()
    assert a.numpy().tolist() != list(range(10))


def test_a_stage_map_is_named_after_the_stage():
    ds = apply_stage(tf.data.Dataset.range(3), Stage("read+decode", lambda x: x + 1), parallel=True, ordered=True)
    assert list(ds.as_numpy_iterator()) == [1, 2, 3]
    graph = tf.compat.v1.GraphDef.FromString(ds._as_serialized_graph().numpy())
    (mapped,) = [n for n in graph.node if n.op == "ParallelMapDatasetV2"]
    assert b"read_decode" in mapped.attr["metadata"].s  # the name bench --ops and traces show


def test_input_pipelines_get_disjoint_shares_and_too_few_files_are_refused():
    files = tf.data.Dataset.range(6)
    shares = [list(shard_for_input_context(files, 6, tf.distribute.InputContext(2, i)).as_numpy_iterator())
              for i in (0, 1)]
    assert collections.Counter(shares[0] + shares[1]) == {i: 1 for i in range(6)}
    with pytest.raises(ValueError, match="2 files but 3 input pipelines.*--num_shards 3"):
        shard_for_input_context(files, 2, tf.distribute.InputContext(3, 0))
