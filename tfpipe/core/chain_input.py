"""ChainInput: what a Source hands the chain (the per-file table, how to expand a file, the map stages)."""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import tensorflow as tf

from tfpipe.core.plan import Yields
from tfpipe.core.stage import Stage


@dataclasses.dataclass(frozen=True)
class ChainInput:
    """What a Source hands the chain.

    Attributes:
      files: one element per file (cheap values: paths, offsets, labels), in a fixed order.
      num_files: elements of `files`.
      num_examples: examples in one epoch (sizes the whole-set shuffle).
      stages: map stages from an element (after `expand`) to (features, labels).
      expand: for files of many records (shards): element -> dataset of its records;
        None when each file is one example.
      block_length: records the parallel interleave takes from one file at a time.
      blocked: expand yields blocks (batches) of examples; the chain un-blocks them after the
        interleave, or re-cuts whole blocks into batches, so examples do not cross its
        threads one at a time.
      examples_per_block: with blocked: examples in a (full) block.
      fixed_shapes: every example has the same shape (blocks can be re-cut whole).
      count_of: with expand: file element -> its number of examples (for resuming mid-stream).
      paths: the files read, for fingerprints of their contents (snapshot cache, resume).
      records_per_file: with expand: records in each file, where known (eval then reads the
        files strictly one after another while the interleave reads ahead in parallel).
      members: a mixture's members, each (its ChainInput, its weight); `stages` are then the
        ones the mixed examples share.
      example_bytes: with expand: about how many bytes an example takes in the files (0: not
        known); bounds how many examples the train order permutes together in memory.
    """

    files: tf.data.Dataset
    num_files: int
    num_examples: int
    stages: tuple[Stage, ...]
    expand: Optional[Callable[..., tf.data.Dataset]] = None
    block_length: int = 1
    blocked: bool = False
    examples_per_block: int = 1
    fixed_shapes: bool = True
    count_of: Optional[Callable[..., tf.Tensor]] = None
    paths: tuple[str, ...] = ()
    records_per_file: tuple[int, ...] = ()
    members: tuple[tuple["ChainInput", float], ...] = ()
    example_bytes: int = 0

    @property
    def yields(self) -> Yields:
        """What the plan needs to know of this input."""
        return Yields(tuple(self.stages), records=self.expand is not None, blocked=self.blocked,
                      fixed_shapes=self.fixed_shapes, num_files=self.num_files, num_examples=self.num_examples,
                      examples_per_block=self.examples_per_block, longest_file=max(self.records_per_file or (1,)),
                      block_length=self.block_length, members=tuple((m.yields, w) for m, w in self.members),
                      example_bytes=self.example_bytes)

