"""The train order: which example comes at stream position i is a pure function of (seed, i).

Each epoch is a permutation of the files drawn from (seed, epoch) with
`tf.random.experimental.index_shuffle`, so the stream can start at any position without
reading, decoding or replaying anything before it (index-based, as Grain does), instead of
checkpointing iterator state (shuffle buffers, positions) the way CheckpointInputPipelineHook
does. Epochs never mix: each one is exactly the data once.

Files of many records (shards, TFRecords) are read in the epoch's file order (in parallel, each
file whole, so the order is fixed), and their records are permuted in windows of `window`
examples with permutations drawn from (seed, epoch, window), so a file written in label order
does not give batches of one label. A start inside a file skips into it (records, or whole
blocks and then part of one), never decoding what it skips. The windows are handed on whole:
the chain re-cuts them into batches (no example crosses tf.data alone) or un-batches them for
per-example stages.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tfpipe.core.steps import Order

_ENDLESS = 1 << 62  # epochs of an endless stream


def epoch_order(epoch: tf.Tensor, positions: tf.Tensor, size: tf.Tensor, seed: int) -> tf.Tensor:
    """The files at `positions` (scalar or vector) of epoch `epoch`'s permutation of `size` files."""
    seeds = tf.stack([tf.constant(seed, tf.int64), tf.cast(epoch, tf.int64)])
    return tf.random.experimental.index_shuffle(positions, seeds, tf.broadcast_to(size - 1, tf.shape(positions)))


def stream(files: tf.data.Dataset, inputs: Any, step: Order) -> tf.data.Dataset:
    """The train stream from example `step.start` on: file elements, or windows of records.

    Args:
      files: the source's files (already this input pipeline's share).
      inputs: the source's ChainInput (expand and count_of, for files of many records).
      step: the plan's Order step (seed, start, epochs, window, parallel reads).
    """
    table = files.batch(_ENDLESS).get_single_element()  # the cheap per-file values, as tensors
    size = tf.shape(tf.nest.flatten(table)[0], out_type=tf.int64)[0]
    if not step.records:  # one example per file: a position is a file
        first_epoch, offset = step.start // size, step.start % size
        positions = tf.range(size, dtype=tf.int64)

        def epoch_files(epoch):
            order = epoch_order(epoch, positions, size, step.seed)[_where(epoch, first_epoch, offset):]
            return tf.data.Dataset.from_tensor_slices(tf.nest.map_structure(lambda t: tf.gather(t, order), table))

        return _epochs(first_epoch, step.epochs).flat_map(epoch_files)
    counts = tf.cast(_call(inputs.count_of, table), tf.int64)
    total = tf.reduce_sum(counts)
    tf.debugging.assert_positive(total, "the files hold no records")  # refused earlier at build
    first_epoch, offset = step.start // total, step.start % total
    return _epochs(first_epoch, step.epochs).flat_map(
        lambda epoch: _epoch_windows(epoch, table, counts, size, _where(epoch, first_epoch, offset), inputs, step))


def _epoch_windows(epoch, table, counts, size, offset, inputs, step: Order) -> tf.data.Dataset:
    """One epoch's records from position `offset` on, as permuted windows of `step.window` examples."""
    window = step.window
    order = epoch_order(epoch, tf.range(size, dtype=tf.int64), size, step.seed)
    ordered_counts = tf.gather(counts, order)
    ends = tf.cumsum(ordered_counts)
    window_start = offset // window * window  # windows are cut from the epoch's start, so read from one
    first = tf.argmax(tf.cast(ends > window_start, tf.int64), output_type=tf.int64)  # the file holding it
    skip = window_start - (ends[first] - ordered_counts[first])  # examples before it in that file
    picked = tf.nest.map_structure(lambda t: tf.gather(t, order[first:]), table)
    files = tf.data.Dataset.from_tensor_slices(picked).enumerate()
    per_block = tf.constant(max(1, inputs.examples_per_block), tf.int64)

    def records(i, element):
        skipped = tf.where(tf.equal(i, 0), skip, 0)
        found = _call(inputs.expand, element)
        if not step.blocked:
            return found.skip(skipped)
        # Blocks: a file skipped into is re-cut into one-example blocks (once per start, one file),
        # so the skip counts examples whatever the file's block size.
        return found.rebatch(tf.where(skipped > 0, tf.constant(1, tf.int64), per_block)).skip(skipped)

    if step.parallel_reads:
        # Each file whole, in the epoch's order (block as long as the longest file), while other
        # threads read the next files ahead: parallel, and still a fixed order.
        found = files.interleave(records, cycle_length=step.cycle_length or tf.data.AUTOTUNE,
                                 block_length=max(step.longest_file, 1), num_parallel_calls=tf.data.AUTOTUNE,
                                 deterministic=True)
    else:
        found = files.flat_map(records)
    windows = found.rebatch(window) if step.blocked else found.batch(window)
    first_window = window_start // window

    def permuted(k, examples):
        n = tf.shape(tf.nest.flatten(examples)[0], out_type=tf.int64)[0]
        # (seed, epoch * 2^31 + window): index_shuffle takes a 2-element seed (it pads it to 3 itself).
        seeds = tf.stack([tf.constant(step.seed, tf.int64), tf.cast(epoch, tf.int64) * (1 << 31) + first_window + k])
        index = tf.random.experimental.index_shuffle(tf.range(n), seeds, tf.broadcast_to(n - 1, [n]))
        drop = tf.where(tf.equal(k, 0), offset - window_start, 0)  # a start inside the first window
        return tf.nest.map_structure(lambda t: tf.gather(t, index[drop:]), examples)

    # In parallel, in order: one gather per window, windows of a 16-core host permuted side by side.
    return windows.enumerate().map(permuted, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def _epochs(first: tf.Tensor, epochs: Any) -> tf.data.Dataset:
    return tf.data.Dataset.range(first, _ENDLESS if epochs is None else epochs)


def _where(epoch: tf.Tensor, first_epoch: tf.Tensor, offset: tf.Tensor) -> tf.Tensor:
    """`offset` in the first epoch, 0 in later ones (tf.equal: in a v1 graph, == is Python identity)."""
    return tf.where(tf.equal(epoch, first_epoch), offset, tf.zeros_like(offset))


def _call(fn, element):
    """fn(*element) for tuple elements (as Dataset.map calls it), else fn(element)."""
    return fn(*element) if isinstance(element, tuple) else fn(element)
