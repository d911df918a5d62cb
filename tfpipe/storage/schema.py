"""The record schema's parts: a Field (dtype, shape; a first dimension of None varies), what a value is.

Pure numpy, no TensorFlow: the writer infers and checks a schema here before anything is
encoded (tfpipe.storage.codec encodes and decodes records with it).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

import numpy as np

NUMERIC_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
                  "uint8", "uint16", "uint32", "uint64", "bool")
STRING_DTYPES = ("bytes", "str")  # both stored as bytes; "str" is UTF-8 text, read back as tf.string
DTYPES = NUMERIC_DTYPES + STRING_DTYPES


@dataclasses.dataclass(frozen=True)
class Field:
    """One stored key: numpy dtype name (or "bytes"/"str") and a shape; a first dimension of None varies."""

    dtype: str
    shape: tuple[Optional[int], ...]

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype {self.dtype!r}: supported dtypes are {', '.join(DTYPES)}")
        fixed = self.shape[1:] if self.variable else self.shape
        if any((not isinstance(d, (int, np.integer))) or d < 0 for d in fixed):
            raise ValueError(f"shape {list(self.shape)!r}: non-negative sizes, and None only for the first "
                             f"dimension (a length that varies from example to example)")

    @property
    def variable(self) -> bool:
        """The first dimension varies from example to example."""
        return bool(self.shape) and self.shape[0] is None

    @property
    def is_string(self) -> bool:
        return self.dtype in STRING_DTYPES

    @property
    def row(self) -> tuple[int, ...]:
        """The shape of one step of the first dimension (variable keys), else the whole shape."""
        return tuple(self.shape[1:]) if self.variable else tuple(self.shape)

    @property
    def size(self) -> int:
        """Values of one example (variable keys: of one step of the first dimension)."""
        return int(np.prod(self.row, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """Bytes one example's value takes (strings: 0, unknown; variable keys: one step)."""
        return 0 if self.is_string else self.size * np.dtype(self.dtype).itemsize

    def fits(self, other: "Field") -> bool:
        """`other` (one example's value) has this dtype and shape; a variable first dimension any length."""
        if self.variable:
            return (other.dtype == self.dtype and len(other.shape) == len(self.shape)
                    and tuple(other.shape[1:]) == self.row)
        return other == self

    def to_json(self) -> dict:
        return {"dtype": self.dtype, "shape": list(self.shape)}

    def text(self) -> str:
        """'int64 [None, 3]'."""
        return f"{self.dtype} {list(self.shape)}"


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


def widen_varying(fields: Mapping[str, Field], examples: Sequence[Any]) -> dict:
    """`fields` with None for a first dimension that differs between the examples (the rest as it is)."""
    out = dict(fields)
    for key, f in fields.items():
        if not f.shape:
            continue
        for example in examples[1:]:
            try:
                got = field_of(example[key])
            except (TypeError, KeyError, ValueError):
                continue  # check() names what is wrong with it
            if got.dtype == f.dtype and len(got.shape) == len(f.shape) and got.shape[1:] == f.shape[1:] \
                    and got.shape[0] != f.shape[0]:
                out[key] = Field(f.dtype, (None, *f.shape[1:]))
                break
    return out


def castable(got: Field, want: Field) -> bool:
    """Python numbers take the schema's dtype (an int where int32 is stored, a float for float64)."""
    if not want.fits(Field(want.dtype, got.shape)):
        return False
    if got.is_string or want.is_string:
        return got.is_string and want.is_string
    if want.dtype == "bool" or got.dtype not in ("int64", "float32"):
        return False  # only Python numbers and lists adapt; numpy values must match the schema
    return np.dtype(got.dtype).kind in ("i" if want.dtype.startswith(("int", "uint")) else "if")
