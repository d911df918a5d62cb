"""The stage report of a bench run: single-thread rates of each step of the data's domain chain.

list -> each of the domain's stages (wav: read, decode, features; images: read, decode,
scale; shards: records, cast) -> batch, each prefix timed on one thread: the difference
between neighbours is what a stage adds per example. The trailing batchable stages are also
timed on whole batches (as `vectorize` runs them), and count at the cheaper of the two ways.

The stage that adds the most is the one that limits the pipeline, and its one-thread rate
times the usable cores is the **limit** (for images, the decode limit): no chain that runs that
stage once per example on these cores goes faster, measured noise aside. The whole chain on
one thread times the cores is shown too, as what linear scaling would give (a chain can beat
it: the one-thread run pays per-element costs once per op that a fused parallel chain shares).
Pure: the measuring is the worker's.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

STAGE_NAMES = ("list", "read", "decode", "features", "batch")  # the audio (wav) domain's chain


def added_ms(rates: Sequence[float]) -> tuple[float, ...]:
    """Milliseconds per example each prefix adds to the one before it (never below 0)."""
    costs = [1000.0 / r for r in rates]
    return tuple(max(0.0, c - p) for c, p in zip(costs, [0.0] + costs[:-1]))


@dataclasses.dataclass(frozen=True)
class StageReport:
    """Single-thread throughput of each prefix of the data's domain chain, for one feature config.

    Attributes:
      label: which config this is, e.g. "audio features", "image features", or the fields
        where two measured configs differ ("backend=librosa").
      rates: examples/s of list, list + the first stage, ..., all stages + batch.
      fused_rate: examples/s of one map running every stage per example.
      vectorized_rate: examples/s of the stages before batch per example, then the trailing
        batchable ones on whole batches (None: the domain has no batchable trailing stage).
      cores: usable cores (CPU affinity).
      names: a name per rate: "list", the domain's stage names (e.g. read, decode, features),
        "batch".
      features: the config measured, as a plain dict.
      batch_size: the batch size measured.
      batched: how many of the last stages (before "batch") `vectorized_rate` ran on whole batches.
    """

    label: str
    rates: tuple[float, ...]
    fused_rate: float
    vectorized_rate: Optional[float]
    cores: int
    names: tuple[str, ...] = STAGE_NAMES
    features: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    batch_size: int = 0
    batched: int = 0

    def __post_init__(self):
        if len(self.names) != len(self.rates):
            raise ValueError(f"StageReport: {len(self.rates)} rates but {len(self.names)} stage names")

    @property
    def backend(self) -> str:
        """Old name of `label` (when the only configs measured were the audio feature backends)."""
        return self.label

    @property
    def added_ms(self) -> tuple[float, ...]:
        """Milliseconds per example each stage adds, one at a time per example."""
        return added_ms(self.rates)

    @property
    def on_batches_ms(self) -> Optional[float]:
        """ms per example of the trailing batchable stages and the batch, run on whole batches (None: not timed)."""
        if not (self.vectorized_rate and self.batched):
            return None
        before = self.rates[len(self.rates) - 2 - self.batched]  # the chain up to the last per-example stage
        return max(0.0, 1000.0 / self.vectorized_rate - 1000.0 / before)

    @property
    def units(self) -> tuple[tuple[str, float, bool], ...]:
        """(stage, ms per example, on batches) as the cheaper way runs each: the batched tail as one unit."""
        costs = self.added_ms
        tail = len(self.names) - 1 - self.batched  # first index of the batched stages + batch
        on_batches = self.on_batches_ms
        if on_batches is None or on_batches >= sum(costs[tail:]):
            return tuple((n, c, False) for n, c in zip(self.names, costs))
        tail_name = " + ".join(self.names[tail:-1])
        return tuple((n, c, False) for n, c in zip(self.names[:tail], costs[:tail])) + ((tail_name, on_batches, True),)

    @property
    def limiting(self) -> str:
        """The stage that adds the most time per example, run the cheaper way."""
        return max(self.units, key=lambda unit: unit[1])[0]

    @property
    def limiting_rate(self) -> float:
        """Examples/s the limiting stage alone manages on one thread."""
        cost = max(unit[1] for unit in self.units)
        return 1000.0 / cost if cost > 0 else self.best_rate  # nothing measurable added: the chain's own rate

    @property
    def ideal(self) -> float:
        """The limit: the limiting stage's one-thread rate times the usable cores (e.g. the decode limit)."""
        return self.limiting_rate * self.cores

    @property
    def best_rate(self) -> float:
        """The best single-thread way of running the whole chain: fused or vectorized."""
        return max(self.fused_rate, self.vectorized_rate or 0.0)

    @property
    def linear(self) -> float:
        """The whole chain's best one-thread rate times the cores: what linear scaling would give."""
        return self.best_rate * self.cores

    def table_lines(self, pinned: bool = False) -> list[str]:
        """The stage section of the bench table: one row per stage, the limiting one marked, the limit."""
        from tfpipe.bench.text import align_table

        rows = [["stage", "examples/s", "ms/example added", ""]]
        limiting = self.limiting
        for name, rate, cost in zip(self.names, self.rates, self.added_ms):
            rows.append([name, f"{rate:,.0f}", f"{cost:.3f}", "<- limits the pipeline" if name == limiting else ""])
        lines = [f"stages ({self.label}, one thread; each row adds one step to the chain):"]
        lines += ["  " + line for line in align_table(rows, right=range(1, 4))]
        if self.on_batches_ms is not None:
            tail = " + ".join(self.names[len(self.names) - 1 - self.batched:])
            marker = "  <- limits the pipeline" if limiting not in self.names else ""
            lines.append(f"  {tail} on whole batches (vectorize): {self.on_batches_ms:.3f} ms/example{marker}")
        ways = f"{self.fused_rate:,.0f}/s fused" + (f", {self.vectorized_rate:,.0f}/s vectorized"
                                                     if self.vectorized_rate else "")
        lines.append(f"  limit = {limiting} alone on one thread ({self.limiting_rate:,.0f}/s) x {self.cores} cores = "
                     f"{self.ideal:,.0f} examples/s: no chain running {limiting} once per example goes faster here"
                     + (" (pinned rows: x their cores)" if pinned else ""))
        lines.append(f"  whole chain on one thread: {ways}; x {self.cores} cores = {self.linear:,.0f}/s "
                     f"if it scaled linearly")
        return lines

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return {"label": self.label, "features": dict(self.features), "batch_size": self.batch_size,
                "cores": self.cores, "limiting": self.limiting, "limiting_rate": self.limiting_rate,
                "ideal": self.ideal, "linear": self.linear, "fused_rate": self.fused_rate,
                "vectorized_rate": self.vectorized_rate, "batched": self.batched,
                "on_batches_ms_per_example": self.on_batches_ms,
                "stages": [{"name": n, "examples_per_s": r, "added_ms_per_example": a}
                           for n, r, a in zip(self.names, self.rates, self.added_ms)]}
