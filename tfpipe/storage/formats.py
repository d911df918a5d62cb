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
from tfpipe.storage.codec import RecordCodec, rows

BLOCK, EXAMPLE = "tfrecord-block", "tfrecord-example"
_TARGET_BLOCK_BYTES = 1 << 20  # 1 MiB of values per block: per-record costs amortized, reads stay small
_MAX_BLOCK_EXAMPLES = 256  # also bounds what one block keeps together before the example shuffle
# Records the interleave takes from one v1 shard before the next: amortizes its per-element hand-off
# between threads (about half the interleave's CPU per record). Records in a shard are already shuffled.
_V1_INTERLEAVE_BLOCK = 16
# Bytes each TFRecord reader of a remote file (gs://, s3://) asks for at once: each request waits
# tens of ms on the store, so small reads leave the reader idle (README "Data in object stores").
READ_AHEAD_BYTES = 8 << 20  # 8 MiB
_LOCAL_BUFFER_BYTES = 256 << 10  # 256 KiB: TFRecordDataset's own default
_REMOTE_PATH = "(?i)[a-z][a-z0-9+.-]*://.*"  # a path with a scheme (RE2: tf.strings.regex_full_match)
_BLOCK_COUNT_MESSAGE = (": damaged shard: a block holds other example counts than tfpipe.json lists; "
                        "run `tfpipe inspect --verify` on its folder")


class RecordFormat(Protocol):
    """What the writers and the reader need from a format."""

    name: str
    blocked: bool  # expand yields blocks (batches) of examples, which the chain un-blocks

    def block_size(self, codec: RecordCodec, num_examples: int, example_bytes: int = 0) -> int:
        """Examples per record for a shard of `num_examples` (of `example_bytes` each, where they vary)."""

    def records(self, codec: RecordCodec, examples: Sequence[Mapping[str, Any]], labels: Sequence[int],
                names: Sequence[str], block_size: int) -> Iterator[bytes]:
        """Serialized records holding `examples` in order."""

    def expand(self, codec: RecordCodec, keys: Sequence[str], cast: Mapping[str, str]):
        """fn(path, num_records, num_examples, block_size) -> dataset of one shard's (position, record) elements."""

    def stages(self, codec: RecordCodec, keys: Sequence[str], cast: Mapping[str, str]) -> list[Stage]:
        """Map stages from expand's elements to (features, labels)."""

    def interleave_block(self, block_size: int) -> int:
        """Elements the parallel interleave takes from one shard at a time."""


class ExampleFormat:
    """v1: one tf.train.Example per example."""

    name = EXAMPLE
    blocked = False

    def block_size(self, codec: RecordCodec, num_examples: int, example_bytes: int = 0) -> int:
        return 1

    def records(self, codec, examples, labels, names, block_size) -> Iterator[bytes]:
        for example, label, name in zip(examples, labels, names):
            yield codec.encode([example], [label], [name])

    def expand(self, codec, keys, cast):
        return checked_records

    def stages(self, codec, keys, cast) -> list[Stage]:
        def parse(positions, records):  # one record or, vectorized, a batch of them: one parse_example
            values, labels = codec.decode(records, keys)
            return _cast(values, cast), labels

        # Keys that vary in length parse one record at a time: a batch of them would be ragged.
        return [Stage("parse", parse, batchable=not any(codec.fields[k].variable for k in keys))]

    def interleave_block(self, block_size: int) -> int:
        return _V1_INTERLEAVE_BLOCK


class BlockFormat:
    """v2: one tf.train.Example per block of examples."""

    name = BLOCK
    blocked = True

    def block_size(self, codec: RecordCodec, num_examples: int, example_bytes: int = 0) -> int:
        per = _TARGET_BLOCK_BYTES // max(example_bytes or codec.example_bytes, 1)
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
                sizes = [rows(v) for v in values.values()] + [got]
                ok = tf.reduce_all(tf.equal(tf.stack(sizes), expected))
                message = tf.strings.join([path, _BLOCK_COUNT_MESSAGE])
                with tf.control_dependencies([tf.debugging.Assert(ok, [message])]):
                    labels = tf.identity(labels)
                return values, labels  # stored dtypes: half the bytes through shuffle and batch

            # The chain un-blocks after the interleave, so examples do not cross its threads one
            # at a time (1.9x the examples/s, measured).
            return checked_records(path, num_records).map(parse)

        return read_shard

    def stages(self, codec, keys, cast) -> list[Stage]:
        # Parsed inside expand, once per block. The cast to the written dtype (float16 -> float32)
        # runs on whole batches, after the example shuffle and batch moved the smaller values.
        stages = []
        if any(codec.fields[k].variable for k in keys):
            # Un-blocked, a RaggedTensor row is a dense tensor of the example's own length, but its spec
            # stays ragged: passing it through one map makes it a plain tensor (padded_batch needs that).
            stages.append(Stage("dense", lambda values, labels: (dict(values), labels)))
        if cast:
            stages.append(Stage("cast", lambda values, labels: (_cast(values, cast), labels), batchable=True))
        return stages

    def interleave_block(self, block_size: int) -> int:
        return 1  # the interleave's elements are whole blocks


FORMATS: dict[str, RecordFormat] = {EXAMPLE: ExampleFormat(), BLOCK: BlockFormat()}


def get_format(name: str) -> RecordFormat:
    """The registered format called `name`."""
    if name not in FORMATS:
        raise ValueError(f"format={name!r}: known formats are {', '.join(map(repr, FORMATS))}")
    return FORMATS[name]


def default_format(codec: RecordCodec) -> str:
    """Blocks, for any schema (variable-length keys store their lengths in the block)."""
    return BLOCK


# --- reading one shard's records, checked against the index --------------------------------

def checked_records(path, num_records, num_examples=None, block_size=None, compression="", *,
                    damaged: str = "", extra: str = "", missing: str = "", first=0):
    """One shard's (position, record) pairs, failing by the shard's name when it holds fewer or more than indexed.

    TFRecordDataset's CRC errors do not name the file. Instead a bad record ends this shard
    (ignore_errors moves on), so the element after the last good record is the `damaged` one,
    which raises with the shard's path; a whole shard never reaches it: take(). A file that
    cannot be opened (removed, unreadable) is retried by TFRecordDataset at every call, so
    ignore_errors alone would spin forever, deaf to Ctrl-C; zipped behind a range of the
    record count, each retry uses up one position, and the shard ends after `num_records` tries
    with the same named error. A shard with more records than the index lists (an index edited
    down) fails too: a second reader skips the listed records (headers only) and finds one more.
    Positions count from `first` (tfpipe.records puts the file's index there, to name a record).
    """
    import tensorflow as tf

    remote = tf.strings.regex_full_match(path, _REMOTE_PATH)
    positions = tf.data.Dataset.range(first, first + tf.cast(num_records, tf.int64))  # first in the zip: consumed
    # even when the read fails
    records = tf.data.TFRecordDataset(path, compression_type=compression,
                                      buffer_size=tf.where(remote, tf.constant(READ_AHEAD_BYTES, tf.int64),
                                                                  _LOCAL_BUFFER_BYTES))
    read = tf.data.Dataset.zip((positions, records)).ignore_errors(log_warning=False)
    fewer = tf.data.Dataset.from_tensors((tf.cast(num_records, tf.int64), path)).map(
        _raise(path, damaged or _DAMAGED, missing=missing or _MISSING))
    # Remote files skip this check: skipping records there costs a request per record (or, with a
    # read-ahead buffer, the whole file again); their size is checked against the index up front.
    more = tf.data.TFRecordDataset(path, compression_type=compression).skip(num_records).take(
        tf.where(remote, tf.constant(0, tf.int64), 1)).map(
        lambda record: (tf.cast(num_records, tf.int64), record)).map(_raise(path, extra or _EXTRA))
    return read.concatenate(fewer).take(num_records).concatenate(more)


def _raise(path, reason: str, missing: str = ""):
    """fn(position, record) that fails naming the shard `path` and `reason` (runs only for a bad shard).

    With `missing`, a file that is no longer there gets that reason instead.
    """
    import tensorflow as tf

    def fail(position, record):
        message = tf.strings.join([path, reason])
        if missing:
            literal = tf.strings.regex_replace(path, r"([*?\[\]])", r"[\1]")  # the path, not a glob
            gone = tf.equal(tf.size(tf.io.matching_files(literal)), 0)
            message = tf.where(gone, tf.strings.join([path, missing]), message)
        with tf.control_dependencies([tf.debugging.Assert(False, [message])]):
            return tf.identity(position), tf.identity(record)

    return fail


_DAMAGED = (": cannot be read to the end: fewer readable records than tfpipe.json lists (unreadable, corrupted "
            "or truncated; or replaced while this reader was reading it); run `tfpipe inspect --verify` on its "
            "folder and rerun the same tfpipe prepare command to rewrite it")
_MISSING = (": shard missing: removed after the dataset was built (a tfpipe prepare rewriting the folder removes "
            "shards of an earlier --num_shards); build the dataset again once the folder is complete")
_EXTRA = (": more records than tfpipe.json lists for this shard (the index was edited or belongs to other "
          "shards); rerun tfpipe prepare, then `tfpipe inspect --verify` on its folder")


def _cast(values: dict, cast: Optional[Mapping[str, str]]) -> dict:
    """Stored dtypes -> the dtypes the writer was given (e.g. float16 on disk, float32 out)."""
    if not cast:
        return values
    import tensorflow as tf

    return {k: tf.cast(v, cast[k]) if k in cast else v for k, v in values.items()}
