"""A learnable synthetic corpus of .npy arrays (numpy only: `tfpipe synth --domain npy` needs no TensorFlow).

Four classes of float32 arrays, each a pattern at a random strength, position and sign of
contrast, in noise: horizontal and vertical stripes, a diagonal ramp, a centred blob.
"""

from __future__ import annotations

import os

import numpy as np
from tqdm import tqdm

from tfpipe.core import corpus

CLASS_NAMES = ("blob", "diagonal", "horizontal", "vertical")


def write_files(out_dir: str, *, per_class: int = 100, seed: int = 0, progress: bool = True,
                array_shape: tuple = (16, 16)) -> str:
    """Writes `per_class` arrays of `array_shape` per class under out_dir/<class>/<class>_<i>.npy; returns out_dir.

    The same arguments write the same files; a folder that already holds them is left as it is.

    Raises:
      ValueError: bad arguments, or out_dir holds files that are not this corpus.
    """
    if per_class < 1:
        raise ValueError(f"per_class={per_class}: must be >= 1")
    shape = tuple(int(d) for d in array_shape)
    if len(shape) != 2 or min(shape) < 4:
        raise ValueError(f"array_shape={shape}: the synthetic patterns need two sides of at least 4")
    out_dir = os.fspath(out_dir)
    spec = {"format": "tfpipe-npy-synth", "version": 1, "classes": list(CLASS_NAMES), "per_class": per_class,
            "array_shape": list(shape), "seed": seed}
    if corpus.is_complete(out_dir, spec):
        return out_dir
    rows, cols = np.mgrid[0:shape[0], 0:shape[1]].astype(np.float32)
    with corpus.writing(out_dir, spec, CLASS_NAMES, "npy corpus"), \
            tqdm(total=per_class * len(CLASS_NAMES), desc="synth", unit="array", disable=not progress) as bar:
        for class_id, name in enumerate(CLASS_NAMES):
            os.makedirs(os.path.join(out_dir, name), exist_ok=True)
            for i in range(per_class):
                rng = np.random.default_rng([seed, class_id, i])
                pattern = _pattern(name, rows, cols, shape, rng)
                array = rng.uniform(0.5, 1.5) * rng.choice([-1.0, 1.0]) * pattern + 0.3 * rng.standard_normal(shape)
                np.save(os.path.join(out_dir, name, f"{name}_{i:05d}.npy"), array.astype(np.float32))
                bar.update(1)
    return out_dir


def _pattern(name: str, rows: np.ndarray, cols: np.ndarray, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    period = rng.uniform(3.0, 6.0)
    if name == "horizontal":
        return np.sin(2 * np.pi * rows / period + rng.uniform(0, 2 * np.pi))
    if name == "vertical":
        return np.sin(2 * np.pi * cols / period + rng.uniform(0, 2 * np.pi))
    if name == "diagonal":
        return np.sin(2 * np.pi * (rows + cols) / (1.5 * period) + rng.uniform(0, 2 * np.pi))
    centre = rng.uniform(0.3, 0.7, 2) * np.array(shape)
    return 2 * np.exp(-((rows - centre[0]) ** 2 + (cols - centre[1]) ** 2) / (2 * (min(shape) / 6) ** 2)) - 0.5
