"""RecordCodec: the one place a record schema (key -> dtype, shape) is encoded and decoded.

Every stored value is a tf.train.Example feature, so any TensorFlow reader can read the
shards with the schema from the index:
  - numeric and bool arrays: one bytes value per example, little-endian raw bytes (decode_raw);
  - strings (`bytes`/`str`): a bytes list of prod(shape) values per example;
  - the label: int64.
A block of N examples (format v2) stores each key as one list: the N raw byte strings
joined into one value, N * prod(shape) strings, N labels. Decoding is one
`tf.io.parse_example` (or parse_single_example for a block) plus one decode_raw per key.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from tfpipe.errors import DataError

NUMERIC_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
                  "uint8", "uint16", "uint32", "uint64", "bool")
STRING_DTYPES = ("bytes", "str")  # both stored as bytes; "str" is UTF-8 text, read back as tf.string
DTYPES = NUMERIC_DTYPES + STRING_DTYPES
LABEL_NAME_KEY = "label_name"  # each record also stores its class name: verify checks class_names against it
SCHEMA_KEY = "_schema"  # each record also names its schema ("key:dtype:shape;..."): verify checks the index


@dataclasses.dataclass(frozen=True)
class Field:
    """One stored key: numpy dtype name (or "bytes"/"str") and a fixed shape."""

    dtype: str
    shape: tuple[int, ...]

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype {self.dtype!r}: supported dtypes are {', '.join(DTYPES)}")
        if any((not isinstance(d, (int, np.integer))) or d < 0 for d in self.shape):
            raise ValueError(f"shape {self.shape!r}: fixed non-negative sizes only")

    @property
    def is_string(self) -> bool:
        return self.dtype in STRING_DTYPES

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """Bytes one example's value takes (strings: 0, unknown)."""
        return 0 if self.is_string else self.size * np.dtype(self.dtype).itemsize

    def to_json(self) -> dict:
        return {"dtype": self.dtype, "shape": list(self.shape)}


def field_of(value: Any) -> Field:
    """The Field a value has: numpy arrays and scalars as they are, Python int -> int64,
    float -> float32 (TensorFlow's default), bool -> bool, bytes -> bytes, str -> str."""
    if isinstance(value, (bytes, np.bytes_)):
        return Field("bytes", ())
    if isinstance(value, (str, np.str_)):
        return Field("str", ())
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype.kind in "SO" and all(isinstance(v, (bytes, np.bytes_)) for v in array.flat):
            return Field("bytes", array.shape)
        if array.dtype.kind == "U" or (array.dtype.kind == "O" and all(isinstance(v, str) for v in array.flat)):
            return Field("str", array.shape)
        return Field(array.dtype.name, array.shape)
    if isinstance(value, bool):
        return Field("bool", ())
    if isinstance(value, int):
        return Field("int64", ())
    if isinstance(value, float):
        return Field("float32", ())
    if isinstance(value, (list, tuple)):
        return field_of(np.asarray(value))
    raise ValueError(f"a value of type {type(value).__name__}: store numpy arrays, bytes, str, int, float or bool")


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

    # --- schema ----------------------------------------------------------------------------

    @classmethod
    def infer(cls, example: Mapping[str, Any], label_key: Optional[str] = "label") -> "RecordCodec":
        """The codec of examples shaped like `example` (the label key's value is the label)."""
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
        return cls(fields, label_key)

    @classmethod
    def from_json(cls, features: Mapping[str, Mapping[str, Any]], label_key: Optional[str] = "label",
                  label_names: bool = True) -> "RecordCodec":
        """The codec an index's `features` describes."""
        return cls({k: Field(v["dtype"], tuple(int(d) for d in v["shape"])) for k, v in features.items()},
                   label_key, label_names=label_names)

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
        return ";".join(f"{k}:{f.dtype}:{'x'.join(map(str, f.shape))}" for k, f in sorted(self.fields.items()))

    @property
    def example_bytes(self) -> int:
        """Bytes of one example's fixed-size values (strings not counted)."""
        return sum(f.nbytes for f in self.fields.values())

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
            if got != want and not (python and _castable(got, want)):
                raise ValueError(f"example {position}, key {key!r}: expected {want.dtype} {list(want.shape)} "
                                 f"(the schema), got {got.dtype} {list(got.shape)}")

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
                spec[key] = (tf.io.FixedLenSequenceFeature([], tf.string, allow_missing=True) if block
                             else tf.io.FixedLenFeature([f.size], tf.string))
            else:
                spec[key] = tf.io.FixedLenFeature([], tf.string)
        if self.label_key is not None:
            spec[self.label_key] = (tf.io.FixedLenSequenceFeature([], tf.int64, allow_missing=True) if block
                                    else tf.io.FixedLenFeature([], tf.int64))
            if with_label_names and self.label_names:
                spec[LABEL_NAME_KEY] = (tf.io.FixedLenSequenceFeature([], tf.string, allow_missing=True) if block
                                        else tf.io.FixedLenFeature([], tf.string))
        return spec

    def decode(self, records, keys: Optional[Iterable[str]] = None, *, with_label_names: bool = False):
        """One-example records (a scalar or a batch) -> ({key: tensor [..., *shape]}, labels)."""
        import tensorflow as tf

        keys = list(self.fields) if keys is None else list(keys)
        spec = self.parse_spec(keys, with_label_names=with_label_names)
        batched = records.shape.rank == 1
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
            if f.is_string:
                values = tf.reshape(parsed[k], [-1, *f.shape])
            else:
                values = tf.reshape(_decode_raw(parsed[k], f.dtype), [-1, *f.shape])
            out[k] = tf.ensure_shape(values, [None, *f.shape])
        lead = tf.shape(next(iter(out.values())))[:1] if out else tf.constant([0])
        return out, self._labels(parsed, lead, with_label_names)

    def _values(self, parsed, key: str, lead, lead_shape):
        import tensorflow as tf

        f = self.fields[key]
        if not f.is_string:
            parsed = _decode_raw(parsed, f.dtype)
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


def _castable(got: Field, want: Field) -> bool:
    """Python numbers take the schema's dtype (an int where int32 is stored, a float for float64)."""
    if got.shape != want.shape:
        return False
    if got.is_string or want.is_string:
        return got.is_string and want.is_string
    if want.dtype == "bool" or got.dtype not in ("int64", "float32"):
        return False  # only Python numbers and lists adapt; numpy values must match the schema
    return np.dtype(got.dtype).kind in ("i" if want.dtype.startswith(("int", "uint")) else "if")


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
