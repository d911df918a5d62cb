"""The npy domain's offline featurizer (what `tfpipe prepare` runs): numpy.load, checked, stacked."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from tfpipe.core.domain import Offline, Schema
from tfpipe.errors import DataError

from tfpipe_npy.config import STORES, NpyConfig


class NpyOffline(Offline):
    """Any .npy numpy loads whose array has the config's shape, as float32."""

    def __init__(self, config: NpyConfig, store: str):
        if store not in STORES:
            raise ValueError(f"store={store!r}: allowed values are {', '.join(map(repr, STORES))}")
        self.config = config
        self.schema = Schema({config.feature_key: ("float32", config.array_shape)})

    def load(self, path: str) -> np.ndarray:
        try:
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise DataError(f"{path}: not a readable .npy array ({e})") from None
        if array.shape != self.config.array_shape or not np.issubdtype(array.dtype, np.number):
            raise DataError(f"{path}: holds {array.dtype} {array.shape}, not numbers of shape "
                            f"{self.config.array_shape} (--array_shape)")
        return array.astype(np.float32)

    def featurize(self, loaded: Sequence[np.ndarray]) -> dict:
        return {self.config.feature_key: np.stack(loaded)}
