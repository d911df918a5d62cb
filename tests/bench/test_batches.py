"""bench/batches.py: what a batch holds, and the share of it that is padding where examples vary in shape."""

import numpy as np
import pytest
import tensorflow as tf

from tfpipe.bench import batches


def _padded(lengths, batch_size, width=None):
    """Examples 1..n (no zeros of their own), padded per batch; each a vector, or rows of `width` values."""
    def make(n):
        values = tf.range(1, n + 1, dtype=tf.float32)
        return values if width is None else tf.tile(values[:, None], [1, width])

    ds = tf.data.Dataset.from_tensor_slices(lengths).map(lambda n: ({"x": make(n)}, n % 2))
    return ds.padded_batch(batch_size)


def test_padding_share_counts_the_values_padded_batch_added():
    ds = _padded([1, 2, 3, 4, 5, 1, 2, 3], 4)
    first = list(ds.take(2))
    # Batch 1: lengths 1-4 padded to 4: 16 values, 10 real. Batch 2: 5, 1, 2, 3 padded to 5: 20 values, 11 real.
    assert batches.padding_share(first, ds.element_spec) == pytest.approx((6 + 9) / (16 + 20))
    assert batches.padding_share(first[:1], ds.element_spec) == pytest.approx(6 / 16)
    rows = _padded([1, 3], 2, width=3)  # [length, 3] examples: padding whole rows of 3
    assert batches.padding_share(list(rows), rows.element_spec) == pytest.approx(6 / 18)
    images = tf.data.Dataset.from_tensor_slices([1, 2]).map(lambda n: tf.ones([n, n + 1, 3])).padded_batch(2)
    # Two varying axes: 1x2 and 2x3 pixels in a 2x3 frame: 6 + 18 real of 36 values.
    assert batches.padding_share(list(images), images.element_spec) == pytest.approx(12 / 36)


def test_fixed_shapes_have_no_padding_share():
    ds = tf.data.Dataset.range(8).map(lambda x: ({"x": tf.fill([3], x)}, x)).batch(4)
    assert batches.padding_share(list(ds), ds.element_spec) is None
    strings = tf.data.Dataset.from_tensor_slices(["a", "bb"]).batch(2)  # not numbers: nothing to count
    assert batches.padding_share(list(strings), strings.element_spec) is None


def test_describe_and_count_a_batch():
    batch = ({"image": np.zeros([4, 8, 8, 3], np.uint8)}, tf.zeros([4], tf.int64))
    assert batches.describe(batch) == "({'image': uint8[4, 8, 8, 3]}, int64[4])"
    assert batches.num_examples(batch) == 4
