"""Resumable train order: which example comes at position i is a pure function of (seed, i).

Each epoch is a permutation of the files drawn from (seed, epoch) with
`tf.random.experimental.index_shuffle`, so the stream can start at any step without
reading, decoding or replaying anything before it (index-based, as Grain does),
instead of checkpointing iterator state (shuffle buffers, positions) the way
CheckpointInputPipelineHook does.

Files of many records (shards) are permuted per epoch as whole files and read one after
another; the start skips into the first file (records, not decoded examples).
"""

from __future__ import annotations

import tensorflow as tf

from tfpipe.core.chain_input import ChainInput

_ENDLESS = 1 << 62  # positions of an endless stream


def permuted(index: tf.Tensor, size: tf.Tensor, seed: int) -> tf.Tensor:
    """The file at stream position `index` (scalar) of the per-epoch permutations of `size` files."""
    return epoch_order(index // size, index % size, size, seed)


def epoch_order(epoch: tf.Tensor, positions: tf.Tensor, size: tf.Tensor, seed: int) -> tf.Tensor:
    """The files at `positions` (scalar or vector) of epoch `epoch`'s permutation of `size` files."""
    seeds = tf.stack([tf.constant(seed, tf.int64), epoch])
    return tf.random.experimental.index_shuffle(positions, seeds, tf.broadcast_to(size - 1, tf.shape(positions)))


def stream(files: tf.data.Dataset, inputs: ChainInput, seed: int, start_example: int) -> tf.data.Dataset:
    """The endless train stream from example `start_example` on: file elements, or records of `expand`.

    Args:
      files: the source's files (already this input pipeline's share).
      inputs: the source's ChainInput (expand, for files of many records).
      seed: fixes every epoch's order.
      start_example: position in the stream (step x batch size) to start at.
    """
    table = files.batch(_ENDLESS).get_single_element()  # the cheap per-file values, as tensors
    size = tf.shape(tf.nest.flatten(table)[0], out_type=tf.int64)[0]

    def element(index):
        return tf.nest.map_structure(lambda t: tf.gather(t, permuted(index, size, seed)), table)

    if inputs.expand is None:  # one example per file: position = file index
        return tf.data.Dataset.range(start_example, _ENDLESS).map(element)
    # Files of records: find the file holding `start_example` and the records to skip in it.
    counts = tf.cast(_call(inputs.count_of, table), tf.int64)
    total = tf.reduce_sum(counts)
    epoch, offset = start_example // total, start_example % total
    order = epoch_order(epoch, tf.range(size, dtype=tf.int64), size, seed)
    ends = tf.cumsum(tf.gather(counts, order))
    first = tf.argmax(tf.cast(ends > offset, tf.int64), output_type=tf.int64)  # first file ending after offset
    skip = offset - (ends[first] - tf.gather(counts, order)[first])
    start = epoch * size + first

    def records(index):
        skipped = tf.where(tf.equal(index, start), skip, 0)  # not ==: in a v1 graph (Estimator) that is Python identity, always False
        records = _call(inputs.expand, element(index))
        return (records.unbatch() if inputs.blocked else records).skip(skipped)

    return tf.data.Dataset.range(start, _ENDLESS).flat_map(records)


def _call(fn, element):
    """fn(*element) for tuple elements (as Dataset.map calls it), else fn(element)."""
    return fn(*element) if isinstance(element, tuple) else fn(element)
