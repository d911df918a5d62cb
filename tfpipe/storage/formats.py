"""Record formats of a shard file: how examples become TFRecord records and come back.

  "tfrecord-example" (v1): one tf.train.Example per example (the most interoperable; one
      parse per batch of records after the chain's batch).
  "tfrecord-block" (v2): one tf.train.Example per block of N examples (N per shard, in the
      index), each key one concatenated list. Per-record costs (read, CRC, hand-offs, parse)
      are paid once per block; the shard's expand function parses a block with one call
      and un-blocks it, so the chain's example shuffle still works on examples.

A format is one class in the registry below; nothing else branches on its name.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Optional, Protocol, Sequence

from tfpipe.core.stage import Stage
from tfpipe.storage.codec import RecordCodec

BLOCK, EXAMPLE = "tfrecord-block", "tfrecord-example"
_TARGET_BLOCK_BYTES = 1 << 20  # 1 MiB of values per block: per-record costs amortized, reads stay small
_MAX_BLOCK_EXAMPLES = 256  # also bounds what one block keeps together before the example shuffle
# Records the interleave takes from one v1 shard before the next: amortizes its per-element hand-off
# between threads (about half the interleave's CPU per record). Records in a shard are already shuffled.
_V1_INTERLEAVE_BLOCK = 16
_BLOCK_COUNT_MESSAGE = (": damaged shard: a block holds other example counts than tfpipe.json lists; "
                        "run `tfpipe inspect --verify` on its folder")


class RecordFormat(Protocol):
    """What the writers and the reader need from a format."""

    name: str
    blocked: bool  # expand yields blocks (batches) of examples, which the chain un-blocks

    def block_size(self, codec: RecordCodec, num_examples: int) -> int:
        """Examples per record for a shard of `num_examples`."""

    def records(self, codec: RecordCodec, examples: Sequence[Mapping[str, Any]], labels: Sequence[int],
                names: Sequence[str], block_size: int) -> Iterator[bytes]:
        """Serialized records holding `examples` in order."""

    def expand(self, codec: RecordCodec, keys: Sequence[str], cast: Mapping[str, str]):
        """fn(path, num_records, num_examples, block_size) -> dataset of one shard's elements."""

    def stages(self, codec: RecordCodec, keys: Sequence[str], cast: Mapping[str, str]) -> list[Stage]:
        """Map stages from expand's elements to (features, labels)."""

    def interleave_block(self, block_size: int) -> int:
        """Elements the parallel interleave takes from one shard at a time."""


class ExampleFormat:
    """v1: one tf.train.Example per example."""

    name = EXAMPLE
    blocked = False

    def block_size(self, codec: RecordCodec, num_examples: int) -> int:
        return 1

    def records(self, codec, examples, labels, names, block_size) -> Iterator[bytes]:
        for example, label, name in zip(examples, labels, names):
            yield codec.encode([example], [label], [name])

    def expand(self, codec, keys, cast):
        return checked_records

    def stages(self, codec, keys, cast) -> list[Stage]:
        def parse(records):  # one record or, vectorized, a batch of them: one parse_example
            values, labels = codec.decode(records, keys)
            return _cast(values, cast), labels

        return [Stage("parse", parse, batchable=True)]

    def interleave_block(self, block_size: int) -> int:
        return _V1_INTERLEAVE_BLOCK


class BlockFormat:
    """v2: one tf.train.Example per block of examples."""

    name = BLOCK
    blocked = True

    def block_size(self, codec: RecordCodec, num_examples: int) -> int:
        per = _TARGET_BLOCK_BYTES // max(codec.example_bytes, 1)
        return int(max(1, min(per, _MAX_BLOCK_EXAMPLES, num_examples)))

    def records(self, codec, examples, labels, names, block_size) -> Iterator[bytes]:
        for start in range(0, len(examples), block_size):
            end = start + block_size
            yield codec.encode(examples[start:end], labels[start:end], names[start:end])

    def expand(self, codec, keys, cast):
        import tensorflow as tf

        def read_shard(path, num_records, num_examples, block_size):
            def parse(position, record):
                values, labels = codec.decode_block(record, keys)
                # Each block holds block_size examples, the last one the rest: a block that
                # holds other counts (an index edited or not this shard's) fails, naming the shard.
                expected = tf.minimum(block_size, num_examples - position * block_size)
                got = tf.shape(labels, out_type=tf.int64)[0] if codec.label_key else expected
                sizes = [tf.shape(v, out_type=tf.int64)[0] for v in values.values()] + [got]
                ok = tf.reduce_all(tf.equal(tf.stack(sizes), expected))
                message = tf.strings.join([path, _BLOCK_COUNT_MESSAGE])
                with tf.control_dependencies([tf.debugging.Assert(ok, [message])]):
                    labels = tf.identity(labels)
                return values, labels  # stored dtypes: half the bytes through shuffle and batch

            # Positions by zip with a range of the record count: Dataset.enumerate() (a range up
            # to 2**63) halved the blocks/s, measured. The chain un-blocks after the interleave,
            # so examples do not cross its threads one at a time (1.9x the examples/s, measured).
            positions = tf.data.Dataset.range(num_records)
            return tf.data.Dataset.zip((positions, checked_records(path, num_records))).map(parse)

        return read_shard

    def stages(self, codec, keys, cast) -> list[Stage]:
        # Parsed inside expand, once per block. The cast to the written dtype (float16 -> float32)
        # runs on whole batches, after the example shuffle and batch moved the smaller values.
        if not cast:
            return []
        return [Stage("cast", lambda values, labels: (_cast(values, cast), labels), batchable=True)]

    def interleave_block(self, block_size: int) -> int:
        return 1  # the interleave's elements are whole blocks


FORMATS: dict[str, RecordFormat] = {EXAMPLE: ExampleFormat(), BLOCK: BlockFormat()}


def get_format(name: str) -> RecordFormat:
    """The registered format called `name`."""
    if name not in FORMATS:
        raise ValueError(f"format={name!r}: known formats are {', '.join(map(repr, FORMATS))}")
    return FORMATS[name]


def default_format(codec: RecordCodec) -> str:
    """Blocks for fixed-shape features (every schema tfpipe writes today)."""
    return BLOCK


# --- reading one shard's records, checked against the index --------------------------------

def checked_records(path, num_records, num_examples=None, block_size=None, compression="", *,
                    damaged: str = "", extra: str = ""):
    """One shard's records, failing by the shard's name when it holds fewer or more than indexed.

    TFRecordDataset's CRC errors do not name the file. Instead a bad record ends this shard
    (ignore_errors logs it and moves on), so the element after the last good record is the
    `damaged` one, which raises with the shard's path; a whole shard never reaches it: take().
    A shard with more records than the index lists (an index edited down) fails too: a
    second reader skips the listed records (headers only, no parse) and finds one more.
    """
    import tensorflow as tf

    records = tf.data.TFRecordDataset(path, compression_type=compression).ignore_errors(log_warning=True)
    fewer = tf.data.Dataset.from_tensors(path).map(_raise(path, damaged or _DAMAGED))
    more = tf.data.TFRecordDataset(path, compression_type=compression).skip(num_records).take(1).map(
        _raise(path, extra or _EXTRA))
    return records.concatenate(fewer).take(num_records).concatenate(more)


def _raise(path, reason: str):
    """fn(element) that fails naming the shard `path` and `reason` (runs only for a bad shard)."""
    import tensorflow as tf

    def fail(element):
        message = tf.strings.join([path, reason])
        with tf.control_dependencies([tf.debugging.Assert(False, [message])]):
            return tf.identity(element)

    return fail


_DAMAGED = (": damaged shard: fewer readable records than tfpipe.json lists (corrupted or truncated); run "
            "`tfpipe inspect --verify` on its folder and rerun the same tfpipe prepare command to rewrite it")
_EXTRA = (": more records than tfpipe.json lists for this shard (the index was edited or belongs to other "
          "shards); rerun tfpipe prepare, then `tfpipe inspect --verify` on its folder")


def _cast(values: dict, cast: Optional[Mapping[str, str]]) -> dict:
    """Stored dtypes -> the dtypes the writer was given (e.g. float16 on disk, float32 out)."""
    if not cast:
        return values
    import tensorflow as tf

    return {k: tf.cast(v, cast[k]) if k in cast else v for k, v in values.items()}
