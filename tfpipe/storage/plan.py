"""The shard plan (pure): which example goes to which shard, in which order; default sizes.

No disk access: every function here is a pure function of its arguments, so the local
writer and the Beam writer execute the same plan for the same seed.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from typing import Sequence

import numpy as np

DEFAULT_MAX_SHARDS = 16
_TARGET_SHARD_BYTES = 256 << 20  # 256 MiB: more shards than 16 only when each would be bigger
# Below this many examples one process writes faster than starting worker processes (each loads
# TensorFlow and traces the featurizer, ~1-3 s) would save: ~0.25 ms of work per 1 s clip.
_EXAMPLES_PER_EXTRA_WORKER = 10_000
SHARD_PATTERN = re.compile(r"^(?P<split>[A-Za-z0-9_.]+)-(?P<index>\d{5})-of-(?P<num>\d{5})\.tfrecord$")


@dataclasses.dataclass(frozen=True)
class ShardSpec:
    """One shard of a plan.

    Attributes:
      index: shard number, 0-based.
      num_shards: shards in the whole plan.
      file: the shard's file name inside the output folder.
      examples: positions (in the input's example list) of the examples it holds, in record order.
    """

    index: int
    num_shards: int
    file: str
    examples: tuple[int, ...]


def shard_name(split: str, index: int, num_shards: int) -> str:
    """`{split}-{index:05d}-of-{num_shards:05d}.tfrecord`."""
    return f"{split}-{index:05d}-of-{num_shards:05d}.tfrecord"


def check_split(split: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.]+", split):
        raise ValueError(f"split={split!r}: use letters, digits, '_' or '.' (it prefixes the shard file names)")
    return split


def plan_shards(labels: Sequence[int], num_shards: int, *, seed: int = 0,
                split: str = "train") -> tuple[ShardSpec, ...]:
    """Assigns every example to one shard: deterministic from `seed`, balanced, classes mixed.

    Each class is shuffled and dealt round-robin across the shards, so every shard
    holds n // num_shards or n // num_shards + 1 examples and each class's count per
    shard differs by at most one between shards; each shard's records are then shuffled.

    Args:
      labels: label id of each example (its position is the example's id).
      num_shards: how many shards to write.
      seed: the same seed gives the same plan.
      split: file name prefix ("train", "eval", ...).

    Returns:
      One ShardSpec per shard, in shard order.

    Raises:
      ValueError: fewer examples than shards, or a bad split name.
    """
    check_split(split)
    labels = np.asarray(labels, dtype=np.int64)
    if num_shards < 1 or num_shards > labels.size:
        raise ValueError(f"num_shards={num_shards} for {labels.size} examples: every shard needs at "
                         f"least one example; pass --num_shards between 1 and {labels.size}")
    rng = np.random.default_rng(seed)
    dealt = np.concatenate([rng.permutation(np.flatnonzero(labels == c)) for c in np.unique(labels)])
    return tuple(ShardSpec(i, num_shards, shard_name(split, i, num_shards),
                           tuple(int(e) for e in rng.permutation(dealt[i::num_shards])))
                 for i in range(num_shards))


def default_num_shards(num_examples: int, example_bytes: int = 0) -> int:
    """min(16, examples), or more when 16 shards would each exceed 256 MiB."""
    by_size = math.ceil(num_examples * example_bytes / _TARGET_SHARD_BYTES)
    return max(1, min(num_examples, max(DEFAULT_MAX_SHARDS, by_size)))


def default_workers(num_examples: int, num_shards: int) -> int:
    """0 (this process) for small corpora; else one process per 10k examples, up to the usable cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if num_examples < _EXAMPLES_PER_EXTRA_WORKER or cores < 2:
        return 0
    return max(1, min(cores, num_shards, num_examples // _EXAMPLES_PER_EXTRA_WORKER))
