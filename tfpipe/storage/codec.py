"""RecordCodec: the one place a record schema (key -> dtype, shape) is encoded and decoded.

Every stored value is a tf.train.Example feature, so any TensorFlow reader can read the
shards with the schema from the index:
  - numeric and bool arrays: one bytes value per example, little-endian raw bytes (decode_raw);
  - strings (`bytes`/`str`): a bytes list of prod(shape) values per example;
  - the label: int64.
A block of N examples (format v2) stores each key as one list: the N raw byte strings
joined into one value, N * prod(shape) strings, N labels. Decoding is one
`tf.io.parse_example` (or parse_single_example for a block) plus one decode_raw per key.

Variable length: a key whose first dimension varies from example to example has shape
(None, ...) in the schema. One example's value is stored as above (its own length follows
from its byte or string count); a block also stores each example's first dimension under
`_lengths/KEY`, and decodes to a RaggedTensor [N, None, ...] that un-batches into one dense
tensor per example, of that example's own length.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from tfpipe.errors import DataError
from tfpipe.storage.schema import Field, castable, field_of, widen_varying

LABEL_NAME_KEY = "label_name"  # each record also stores its class name: verify checks class_names against it
SCHEMA_KEY = "_schema"  # each record also names its schema ("key:dtype:shape;..."): verify checks the index
LENGTHS_PREFIX = "_lengths/"  # blocks: `_lengths/KEY` holds each example's first dimension of a variable key


class RecordCodec:
    """Encodes examples (dicts) to tf.train.Example bytes and decodes records back to tensors.

    Attributes:
      fields: stored key -> Field (the label not included).
      label_key: the key of the int64 label in the records, or None (no labels).
      label_names: also store each example's class name (`label_name`) so verify can check
        the index's class_names against the records.
    """

    def __init__(self, fields: Mapping[str, Field], label_key: Optional[str] = "label", *,
                 label_names: bool = True):
        self.fields = dict(fields)
        self.label_key = label_key
        self.label_names = label_names and label_key is not None
        for reserved in (label_key, LABEL_NAME_KEY if self.label_names else None, SCHEMA_KEY):
            if reserved is not None and reserved in self.fields:
                raise ValueError(f"feature key {reserved!r} is reserved (the label, its name, the schema); "
                                 f"rename the feature or pass another label_key")
        taken = [k for k in self.fields if k.startswith(LENGTHS_PREFIX)]
        if taken:
            raise ValueError(f"feature key {taken[0]!r}: keys starting with {LENGTHS_PREFIX!r} are reserved (the "
                             f"lengths of variable-length keys); rename the feature")

    # --- schema ----------------------------------------------------------------------------

    @classmethod
    def infer(cls, examples: Any, label_key: Optional[str] = "label") -> "RecordCodec":
        """The codec of `examples` (a list of dicts, or one): keys, dtypes and shapes of the first, with
        None for a first dimension that differs between them (the label key's value is the label)."""
        examples = [examples] if isinstance(examples, Mapping) else list(examples)
        example = examples[0] if examples else None
        if not isinstance(example, Mapping) or not example:
            raise ValueError(f"example 0 is {type(example).__name__}: write_shards needs dicts of "
                             f"key -> value (numpy arrays, bytes, str, int, float)")
        if label_key is not None and label_key not in example:
            raise ValueError(f"example 0 has no {label_key!r} key (label_key={label_key!r}); "
                             f"pass label_key=None for examples without labels, or name the label's key")
        fields = {}
        for key, value in example.items():
            if key == label_key:
                continue
            try:
                fields[str(key)] = field_of(value)
            except ValueError as e:
                raise ValueError(f"example 0, key {key!r}: {e}") from None
        return cls(widen_varying(fields, examples), label_key)

    @classmethod
    def from_json(cls, features: Mapping[str, Mapping[str, Any]], label_key: Optional[str] = "label",
                  label_names: bool = True) -> "RecordCodec":
        """The codec an index's `features` describes."""
        return cls({k: Field(v["dtype"], tuple(None if d is None else int(d) for d in v["shape"]))
                    for k, v in features.items()}, label_key, label_names=label_names)

    def to_json(self) -> dict:
        return {k: f.to_json() for k, f in self.fields.items()}

    def with_storage_dtype(self, dtype: Optional[str]) -> "RecordCodec":
        """The same keys with floating values stored as `dtype` (e.g. float16: half the bytes)."""
        if dtype is None:
            return self
        changed = {k: Field(dtype, f.shape) if f.dtype.startswith("float") else f for k, f in self.fields.items()}
        return RecordCodec(changed, self.label_key, label_names=self.label_names)

    @property
    def signature(self) -> str:
        """The schema as one string, stored in every record so verify can check the index against it."""
        return ";".join(f"{k}:{f.dtype}:{'x'.join('?' if d is None else str(d) for d in f.shape)}"
                        for k, f in sorted(self.fields.items()))

    @property
    def example_bytes(self) -> int:
        """Bytes of one example's fixed-size values (strings not counted; variable keys: one step)."""
        return sum(f.nbytes for f in self.fields.values())

    @property
    def variable(self) -> tuple[str, ...]:
        """Keys whose first dimension varies from example to example."""
        return tuple(k for k, f in self.fields.items() if f.variable)

    def bytes_of(self, example: Mapping[str, Any]) -> int:
        """Bytes of one example's numeric values as stored (variable keys at their own length)."""
        total = 0
        for key, f in self.fields.items():
            if not f.is_string:
                total += int(np.size(example[key])) * np.dtype(f.dtype).itemsize
        return total

    def check(self, example: Mapping[str, Any], position: int) -> None:
        """ValueError naming the example's position, key, expected and found dtype/shape."""
        if not isinstance(example, Mapping):
            raise ValueError(f"example {position} is {type(example).__name__}, not a dict")
        keys = set(example) - ({self.label_key} if self.label_key else set())
        if keys != set(self.fields):
            missing, extra = sorted(set(self.fields) - keys), sorted(keys - set(self.fields))
            raise ValueError(f"example {position}: keys differ from example 0's"
                             + (f"; missing {missing}" if missing else "") + (f"; extra {extra}" if extra else "")
                             + (f"; no label {self.label_key!r}" if self.label_key and self.label_key not in example
                                else ""))
        for key, want in self.fields.items():
            try:
                got = field_of(example[key])
            except ValueError as e:
                raise ValueError(f"example {position}, key {key!r}: {e}") from None
            python = isinstance(example[key], (int, float, list, tuple)) and not isinstance(example[key], np.generic)
            if not want.fits(got) and not (python and castable(got, want)):
                leading_only = (not want.variable and got.dtype == want.dtype and len(got.shape) == len(want.shape)
                                and got.shape and got.shape[1:] == want.shape[1:])
                vary = (f"; for a first dimension that varies put None there in the schema: "
                        f"{key!r}: ({want.dtype!r}, {(None, *want.shape[1:])})" if leading_only else "")
                raise ValueError(f"example {position}, key {key!r}: expected {want.text()} (the schema), "
                                 f"got {got.text()}{vary}")

    # --- encode ----------------------------------------------------------------------------

    def encode(self, examples: Sequence[Mapping[str, Any]], labels: Sequence[int] = (),
               label_names: Sequence[str] = ()) -> bytes:
        """One serialized tf.train.Example holding `examples` (one, or a block), deterministic bytes."""
        import tensorflow as tf

        feature = {}
        for key, f in self.fields.items():
            if f.is_string:
                values = [_as_bytes(v) for e in examples for v in np.asarray(e[key], dtype=object).reshape(-1)]
                feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
            else:
                little = np.dtype(f.dtype).newbyteorder("<")
                raw = b"".join(np.ascontiguousarray(e[key], dtype=little).tobytes() for e in examples)
                feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[raw]))
            if f.variable:  # each example's own first dimension: a block is cut back into examples by these
                lengths = [int(np.shape(np.asarray(e[key], dtype=object if f.is_string else None))[0])
                           for e in examples]
                feature[LENGTHS_PREFIX + key] = tf.train.Feature(int64_list=tf.train.Int64List(value=lengths))
        if self.label_key is not None:
            feature[self.label_key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in labels]))
            if self.label_names:
                feature[LABEL_NAME_KEY] = tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[n.encode() for n in label_names]))
        feature[SCHEMA_KEY] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[self.signature.encode()]))
        example = tf.train.Example(features=tf.train.Features(feature=feature))
        return example.SerializeToString(deterministic=True)

    # --- decode ----------------------------------------------------------------------------

    def parse_spec(self, keys: Optional[Iterable[str]] = None, *, block: bool = False,
                   with_label_names: bool = False) -> dict:
        """tf.io parse spec of `keys` (default all) plus the label."""
        import tensorflow as tf

        keys = list(self.fields) if keys is None else list(keys)
        spec = {}
        for key in keys:
            f = self.fields[key]
            if f.is_string:
                spec[key] = (tf.io.FixedLenSequenceFeature([], tf.string, allow_missing=True) if block or f.variable
                             else tf.io.FixedLenFeature([f.size], tf.string))
            else:
                spec[key] = tf.io.FixedLenFeature([], tf.string)
            if block and f.variable:
                spec[LENGTHS_PREFIX + key] = tf.io.FixedLenSequenceFeature([], tf.int64, allow_missing=True)
        if self.label_key is not None:
            spec[self.label_key] = (tf.io.FixedLenSequenceFeature([], tf.int64, allow_missing=True) if block
                                    else tf.io.FixedLenFeature([], tf.int64))
            if with_label_names and self.label_names:
                spec[LABEL_NAME_KEY] = (tf.io.FixedLenSequenceFeature([], tf.string, allow_missing=True) if block
                                        else tf.io.FixedLenFeature([], tf.string))
        return spec

    def decode(self, records, keys: Optional[Iterable[str]] = None, *, with_label_names: bool = False):
        """One-example records (a scalar or a batch) -> ({key: tensor [..., *shape]}, labels).

        Variable keys (first dimension None) decode one record at a time: [its length, ...].
        """
        import tensorflow as tf

        keys = list(self.fields) if keys is None else list(keys)
        spec = self.parse_spec(keys, with_label_names=with_label_names)
        batched = records.shape.rank == 1
        if batched and any(self.fields[k].variable for k in keys):
            raise ValueError(f"keys {[k for k in keys if self.fields[k].variable]} vary in length: decode one "
                             f"record at a time (a batch of them is ragged)")
        parsed = tf.io.parse_example(records, spec) if batched else tf.io.parse_single_example(records, spec)
        lead = tf.shape(records)
        out = {k: self._values(parsed[k], k, lead, records.shape) for k in keys}
        return out, self._labels(parsed, lead, with_label_names)

    def decode_block(self, record, keys: Optional[Iterable[str]] = None, *, with_label_names: bool = False):
        """One block record -> ({key: tensor [n, *shape]}, labels [n]); n from the record itself."""
        import tensorflow as tf

        keys = list(self.fields) if keys is None else list(keys)
        parsed = tf.io.parse_single_example(record, self.parse_spec(keys, block=True,
                                                                    with_label_names=with_label_names))
        out = {}
        for k in keys:
            f = self.fields[k]
            flat = parsed[k] if f.is_string else _decode_raw(parsed[k], f.dtype)
            values = tf.ensure_shape(tf.reshape(flat, [-1, *f.row]), [None, *f.row])
            # Variable keys: the examples' values one after another, cut by their lengths into [n, None, ...].
            out[k] = tf.RaggedTensor.from_row_lengths(values, parsed[LENGTHS_PREFIX + k]) if f.variable else values
        lead = tf.reshape(rows(next(iter(out.values()))), [1]) if out else tf.constant([0], tf.int64)
        return out, self._labels(parsed, lead, with_label_names)

    def _values(self, parsed, key: str, lead, lead_shape):
        import tensorflow as tf

        f = self.fields[key]
        if not f.is_string:
            parsed = _decode_raw(parsed, f.dtype)
        if f.variable:  # one record: its own length
            return tf.ensure_shape(tf.reshape(parsed, [-1, *f.row]), [None, *f.row])
        values = tf.reshape(parsed, tf.concat([lead, tf.constant(f.shape, tf.int32)], axis=0))
        return tf.ensure_shape(values, lead_shape.concatenate(f.shape))

    def _labels(self, parsed, lead, with_label_names: bool):
        import tensorflow as tf

        if self.label_key is None:
            labels = tf.zeros(lead, tf.int64)  # unlabeled: 0, as for a predict list
        else:
            labels = parsed[self.label_key]
        if with_label_names:
            return labels, parsed.get(LABEL_NAME_KEY, tf.zeros_like(labels, tf.string))
        return labels


def rows(values):
    """The first dimension of a tensor or a RaggedTensor, as an int64 scalar."""
    import tensorflow as tf

    if isinstance(values, tf.RaggedTensor):
        return values.nrows(out_type=tf.int64)
    return tf.shape(values, out_type=tf.int64)[0]


def _as_bytes(value: Any) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


_BITCAST = {"uint32": "int32", "uint64": "int64"}  # decode_raw lacks these: same bytes, then bitcast


def _decode_raw(raw, dtype: str):
    """Little-endian bytes -> values of `dtype` (the last axis holds each string's values)."""
    import tensorflow as tf

    values = tf.io.decode_raw(raw, _BITCAST.get(dtype, dtype), little_endian=True)
    return tf.bitcast(values, dtype) if dtype in _BITCAST else values


def check_all(codec: RecordCodec, examples: Sequence[Mapping[str, Any]]) -> None:
    """codec.check on every example (DataError on the first mismatch)."""
    for i, example in enumerate(examples):
        try:
            codec.check(example, i)
        except ValueError as e:
            raise DataError(str(e)) from None
