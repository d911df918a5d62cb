"""NpyConfig (the domain's features: each field is a flag) and NpyCorpusConfig (what `tfpipe synth` takes).

No TensorFlow and no numpy here: tfpipe's command line reads these to define its flags.
"""

from __future__ import annotations

import dataclasses

from tfpipe.config import config_field, validate

STORES = ("array",)  # what shards store: the arrays as they are


def _shape(value: object, owner: str) -> tuple:
    """A shape as a tuple of positive ints, from a sequence or 'a,b' text (a flag's list)."""
    parts = value.split(",") if isinstance(value, str) else list(value)  # type: ignore[call-overload]
    try:
        shape = tuple(int(str(p).strip()) for p in parts)
    except ValueError:
        shape = ()
    if not shape or min(shape) < 1:
        raise ValueError(f"{owner}.array_shape={','.join(map(str, parts))}: expected positive sizes, e.g. 16,16")
    return shape


@dataclasses.dataclass(frozen=True)
class NpyConfig:
    """Which arrays the domain reads.

    Attributes:
      array_shape: the shape every file's float32 array has (checked up front, from each header).
    """

    array_shape: tuple = config_field((16, 16), "Shape of the float32 array each .npy file holds.")

    def __post_init__(self):
        object.__setattr__(self, "array_shape", _shape(self.array_shape, "NpyConfig"))
        validate(self)

    @property
    def feature_key(self) -> str:
        return "array"

    @property
    def num_bytes(self) -> int:
        """Bytes of one array's data (float32)."""
        n = 4
        for d in self.array_shape:
            n *= d
        return n


@dataclasses.dataclass(frozen=True)
class NpyCorpusConfig:
    """What the synthetic corpus takes besides its size and seed (`tfpipe synth --domain npy` flags).

    Attributes:
      array_shape: the shape of every array written (the domain config's field of the same name
        follows it where a tool writes a corpus for a pipeline).
    """

    array_shape: tuple = config_field((16, 16), "Shape of the float32 array each .npy file holds.")

    def __post_init__(self):
        object.__setattr__(self, "array_shape", _shape(self.array_shape, "NpyCorpusConfig"))
        validate(self)
