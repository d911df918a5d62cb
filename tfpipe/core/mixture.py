"""tfpipe.mix: draw training examples from several sources with weights (seqio Mixture, big_vision's
weighted sample_from_datasets, Grain's mix).

Each member goes through its own chain up to examples (its own files, stages, file shuffle
and example shuffle); then, in train, examples are drawn with the weights
(`tf.data.Dataset.sample_from_datasets`, seeded), and one shared batch and tail follow. In
eval, each member's examples come exactly once, member after member.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional, Sequence

import tensorflow as tf

from tfpipe.core.chain_input import ChainInput
from tfpipe.core.source import find
from tfpipe.core.labels import class_ids_stage
from tfpipe.core.stage import user_stages


@dataclasses.dataclass(frozen=True)
class MixSource:
    """Several sources drawn from with weights.

    Attributes:
      members: the member Sources.
      weights: their sampling weights, normalized to sum 1.
      read, process, batch_process: one function for every member, or a tuple with one per
        member (None where a member needs none).
    """

    members: tuple[Any, ...]
    weights: tuple[float, ...]
    read: Any = None
    process: Any = None
    batch_process: Any = None
    kind = "mixture"  # what Source.kind names (not a field)

    @property
    def root(self) -> str:
        return "mix(" + ", ".join(getattr(m, "root", "") or type(m).__name__ for m in self.members) + ")"

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(p for m in self.members for p in m.paths)

    @property
    def class_names(self) -> tuple[str, ...]:
        """Every member's class names, each once, in order of first appearance: one id per name."""
        names: list[str] = []
        for member in self.members:
            names += [n for n in member.class_names if n not in names]
        return tuple(names)

    @property
    def num_examples(self) -> int:
        return sum(m.num_examples for m in self.members)

    def with_class_names(self, class_names: Sequence[str]) -> "MixSource":
        """Every member numbered by `class_names` (a member's class it does not list is refused, naming it)."""
        return dataclasses.replace(self, members=tuple(find(m, class_names) for m in self.members))

    def examples_per_file(self) -> tuple[int, ...]:
        raise ValueError("a mixture cannot resume mid-stream (its draws depend on every member's position); "
                         "pass make_input_fn(..., resume=False)")

    def chain_input(self, mode: str, features: Any = None, *, read: Any = None, process: Any = None,
                    batch_process: Any = None) -> ChainInput:
        """Each member's ChainInput (its functions), and the shared batch_process as the mixture's own stage."""
        read, process = self.read if self.read is not None else read, self.process or process
        batch_process = self.batch_process or batch_process
        shared = batch_process if batch_process is not None and not isinstance(batch_process, (list, tuple)) else None
        members = tuple(_by_name(m.chain_input(mode, features, read=_nth(read, i), process=_nth(process, i),
                                               batch_process=None if shared is not None else _nth(batch_process, i)),
                                 m.class_names, self.class_names)
                        for i, m in enumerate(self.members))
        files = members[0].files  # not read: the mix step builds each member's own chain
        return ChainInput(files, sum(c.num_files for c in members), sum(c.num_examples for c in members),
                          tuple(user_stages(batch_process=shared)), paths=self.paths,
                          members=tuple(zip(members, self.weights)))


def mix(members: Sequence[tuple[Any, float]], *, read: Any = None, process: Any = None,
        batch_process: Any = None, class_names: Optional[Sequence[str]] = None) -> MixSource:
    """A Source that draws examples from several data sources with weights.

    Args:
      members: `[(data, weight), ...]`: data is anything build_dataset takes (a folder, shard
        folder, CSV, `tfpipe.records(...)`, `(paths, labels)`), weight > 0 (normalized).
      read, process, batch_process: your functions, as for build_dataset: one for every member,
        or a list with one per member (None for a member that needs none). One batch_process
        runs on the mixed batches (vectorize); a list runs per member, per example.
      class_names: number every member's classes by these names (default: each class name
        once, in the order the members list them); a member's class not listed is refused.

    Returns:
      A MixSource for build_dataset / make_input_fn(resume=False).

    Raises:
      ValueError: no members, a weight that is not positive, a function list of the wrong length.
    """
    members = list(members)
    if not members:
        raise ValueError("mix([]): name at least one (data, weight) member")
    weights = []
    for i, member in enumerate(members):
        if not (isinstance(member, (tuple, list)) and len(member) == 2):
            raise ValueError(f"mix member {i}: expected (data, weight), got {member!r}")
        w = member[1]
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 < w < math.inf:
            raise ValueError(f"mix member {i}: weight {w!r} must be a positive, finite number")
        weights.append(float(w))
    for name, fn in (("read", read), ("process", process), ("batch_process", batch_process)):
        if isinstance(fn, (list, tuple)) and len(fn) != len(members):
            raise ValueError(f"mix: {name}= lists {len(fn)} functions for {len(members)} members; give one per "
                             f"member (None where a member needs none) or one for all")
    total = sum(weights)
    return MixSource(tuple(find(data, class_names) for data, _ in members), tuple(w / total for w in weights),
                     _frozen(read), _frozen(process), _frozen(batch_process))


def mix_datasets(datasets: Sequence[tf.data.Dataset], weights: Sequence[float], train: bool,
                 seed: Optional[int]) -> tf.data.Dataset:
    """Train: examples drawn with `weights` (seeded); eval: every member's examples, member after member.

    Raises:
      ValueError: members whose examples differ in keys, dtypes or ranks, naming the difference.
    """
    first = datasets[0].element_spec
    for i, ds in enumerate(datasets[1:], start=1):
        problem = _difference(first, ds.element_spec)
        if problem:
            raise ValueError(f"mix: member {i}'s examples differ from member 0's: {problem}; make every member "
                             f"yield the same features (keys, dtypes, ranks), e.g. with its own process=")
    if not train:
        mixed = datasets[0]
        for ds in datasets[1:]:
            mixed = mixed.concatenate(ds)
        return mixed
    return tf.data.Dataset.sample_from_datasets(datasets, weights=list(weights), seed=seed,
                                                stop_on_empty_dataset=False)


def _difference(a: Any, b: Any) -> str:
    """'' when two element specs agree in structure, dtypes and ranks, else what differs."""
    try:
        tf.nest.assert_same_structure(a, b)
    except (ValueError, TypeError):
        return f"{_show(a)} vs {_show(b)}"
    for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
        if x.dtype != y.dtype or x.shape.rank != y.shape.rank or type(x) is not type(y):
            return f"{_show(a)} vs {_show(b)}"
    return ""


def _show(spec: Any) -> str:
    def one(s):
        return f"{s.dtype.name}{s.shape}" if hasattr(s, "dtype") else type(s).__name__

    return str(tf.nest.map_structure(one, spec))


def _by_name(inputs: ChainInput, names: Sequence[str], union: Sequence[str]) -> ChainInput:
    """A member's input whose label ids are the mixture's ids of its class names (a class named alike
    in two members is one class), by one gather fused into the member's map."""
    ids = [union.index(n) for n in names]
    if ids == list(range(len(ids))):
        return inputs
    return dataclasses.replace(inputs, stages=tuple(inputs.stages) + (class_ids_stage(ids),))


def _nth(fn: Any, i: int) -> Any:
    return fn[i] if isinstance(fn, tuple) else fn


def _frozen(fn: Any) -> Any:
    return tuple(fn) if isinstance(fn, list) else fn
