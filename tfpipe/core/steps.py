"""The chain's steps: one small frozen class per tf.data step, holding every argument it is applied with.

The plan (`tfpipe.core.plan`) decides which steps run, in which order, with which sizes; the chain
(`tfpipe.core.chain`) applies each as it is given (a step is to the chain what grain's
`ds.batch(batch_size=..., drop_remainder=...)` object is to grain). Pure Python: no TensorFlow.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

@dataclasses.dataclass(frozen=True)
class Step:
    """One step of the chain; subclasses hold its arguments. `why` is shown by describe()."""

    def __str__(self) -> str:
        args = ", ".join(f"{f.name}={_show(getattr(self, f.name))}" for f in dataclasses.fields(self)
                         if f.name not in ("why", "stages", "members") and getattr(self, f.name) not in (None, (), ""))
        names = "+".join(s.name for s in getattr(self, "stages", ()))
        return f"{self.name}({names}{', ' if names and args else ''}{args})" if names or args else self.name

    @property
    def name(self) -> str:
        return _snake(type(self).__name__)


@dataclasses.dataclass(frozen=True)
class ReuseMemory(Step):
    """The process's malloc keeps big freed buffers (tfpipe.core.memory)."""
    why: str = "big batches reuse freed buffers instead of faulting pages in (process-wide, glibc)"


@dataclasses.dataclass(frozen=True)
class Mix(Step):
    members: tuple[tuple[Step, ...], ...]
    weights: tuple[float, ...]
    train: bool
    seed: int
    why: str = "examples drawn from the members by weight (eval: member after member)"

    def __str__(self) -> str:
        inner = " | ".join(" -> ".join(map(str, m)) for m in self.members)
        return f"mix(weights={_show(self.weights)}: {inner})"


@dataclasses.dataclass(frozen=True)
class Shard(Step):
    pipelines: int
    index: int
    why: str = "each input pipeline reads a disjoint share of the files"


@dataclasses.dataclass(frozen=True)
class Order(Step):
    """Train: each epoch a permutation of the files drawn from (seed, epoch); records of many-record
    files read in that order and permuted in windows drawn from (seed, epoch, window)."""
    seed: int
    start: int = 0
    epochs: Optional[int] = None
    records: bool = False
    blocked: bool = False
    window: int = 0  # records: examples permuted together
    parallel_reads: bool = False
    cycle_length: int = 0  # 0: AUTOTUNE
    longest_file: int = 1
    why: str = ("repeat + shuffle files in one: exact epochs, no refill stall, starts at any position "
                "without reading what comes before")


@dataclasses.dataclass(frozen=True)
class Repeat(Step):
    count: Optional[int] = None
    why: str = ""


@dataclasses.dataclass(frozen=True)
class ShuffleFiles(Step):
    buffer: int
    seed: int
    why: str = "paths are cheap to buffer; decoded data is not"


@dataclasses.dataclass(frozen=True)
class ReadFiles(Step):
    parallel: bool
    cycle_length: int  # 0: AUTOTUNE
    block_length: int
    deterministic: bool
    why: str = "records of many files at once"


@dataclasses.dataclass(frozen=True)
class Map(Step):
    stages: tuple[Any, ...]
    parallel: bool
    deterministic: bool
    per_example: bool = False
    skip_errors: bool = False  # on_error="skip": a failing example is left out and named
    group: int = 0  # examples per call (0: one): the elements are groups, the stages unrolled over them
    why: str = ""


@dataclasses.dataclass(frozen=True)
class Group(Step):
    """`size` examples (file elements; with windows, re-cut from windows) as one element."""
    size: int
    windows: bool = False
    why: str = "the per-example map is called once per group: tf.data's fixed cost per element paid once per group"


@dataclasses.dataclass(frozen=True)
class Cache(Step):
    where: str
    why: str = "one epoch of examples, before any random stage"


@dataclasses.dataclass(frozen=True)
class Unblock(Step):
    why: str = "blocks (or windows) -> single examples, for the per-example stages that follow"


@dataclasses.dataclass(frozen=True)
class ShuffleExamples(Step):
    buffer: int
    seed: int
    why: str = "decoded examples (or records) in a buffer"


@dataclasses.dataclass(frozen=True)
class ShuffleBlocks(Step):
    buffer: int  # blocks
    window: int  # examples permuted together
    seed: int
    deterministic: bool
    why: str = "whole blocks, then one permutation per window of them: no example crosses tf.data alone"


@dataclasses.dataclass(frozen=True)
class Batch(Step):
    size: int
    drop_remainder: bool
    buckets: tuple[int, ...] = ()
    bucket_key: str = ""
    why: str = ""


@dataclasses.dataclass(frozen=True)
class Rebatch(Step):
    size: int
    drop_remainder: bool
    why: str = "blocks or windows re-cut into batches: no example crosses tf.data alone"


@dataclasses.dataclass(frozen=True)
class Pick(Step):
    key: str
    why: str = "features[key] instead of the dict"


@dataclasses.dataclass(frozen=True)
class FeaturesOnly(Step):
    why: str = "predict: no labels"


@dataclasses.dataclass(frozen=True)
class Options(Step):
    """tf.data options: order kept unless train allows otherwise; static rewrites follow the toggles
    (tf.data's defaults would parallelize "sequential" maps, fuse map+batch, inject a prefetch)."""
    deterministic: bool
    map_parallelization: bool
    map_and_batch_fusion: bool
    inject_prefetch: bool
    why: str = "tf.data's own rewrites follow the toggles, so 'off' really is off"


@dataclasses.dataclass(frozen=True)
class Distribute(Step):
    """Named as PipelineConfig's fields: the service plug-in reads these."""
    data_service: str
    data_service_mode: str
    data_service_job: str
    cache: str
    finite: bool = False  # eval/predict: the epoch ends (the client looks at the workers once more then)
    sharded: bool = False  # each input pipeline reads its own share of the files (a Shard step above)
    why: str = "the tf.data service runs everything above"


@dataclasses.dataclass(frozen=True)
class Prefetch(Step):
    why: str = "the next batch is made while the model trains on this one"


@dataclasses.dataclass(frozen=True)
class PrefetchToDevice(Step):
    device: str = "/gpu:0"
    why: str = "only where a GPU is visible"


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return "(" + ",".join(_show(v) for v in value) + ")"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)
