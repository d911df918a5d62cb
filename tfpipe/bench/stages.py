"""The stage report of a bench run: single-thread rates of each step of the data's domain chain.

list -> each of the domain's stages (wav: read, decode, features; images: read, decode,
scale) -> batch, each prefix timed on one thread: the difference between neighbours is
what a stage adds per example, the largest names the stage that limits the pipeline, and
the best single-thread way of running all of them (fused, or vectorized on batches) times
the cores is the ideal a parallel chain can reach. Pure: the measuring is the worker's.
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
    """

    label: str
    rates: tuple[float, ...]
    fused_rate: float
    vectorized_rate: Optional[float]
    cores: int
    names: tuple[str, ...] = STAGE_NAMES
    features: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    batch_size: int = 0

    def __post_init__(self):
        if len(self.names) != len(self.rates):
            raise ValueError(f"StageReport: {len(self.rates)} rates but {len(self.names)} stage names")

    @property
    def backend(self) -> str:
        """Old name of `label` (when the only configs measured were the audio feature backends)."""
        return self.label

    @property
    def added_ms(self) -> tuple[float, ...]:
        """Milliseconds per example each stage adds."""
        return added_ms(self.rates)

    @property
    def limiting(self) -> str:
        """The stage that adds the most time per example."""
        costs = self.added_ms
        return self.names[costs.index(max(costs))]

    @property
    def best_rate(self) -> float:
        """The best single-thread way of running the maps: fused or vectorized."""
        return max(self.fused_rate, self.vectorized_rate or 0.0)

    @property
    def ideal(self) -> float:
        """The best single-thread way of running the maps, times the usable cores."""
        return self.best_rate * self.cores

    def table_lines(self, pinned: bool = False) -> list[str]:
        """The stage section of the bench table: one row per stage, the limiting one marked, the ideal."""
        from tfpipe.bench.report import align_table

        rows = [["stage", "examples/s", "ms/example added", ""]]
        costs = self.added_ms
        for i, (name, rate, cost) in enumerate(zip(self.names, self.rates, costs)):
            rows.append([name, f"{rate:,.0f}", f"{cost:.3f}", "<- limits the pipeline" if i == costs.index(max(costs))
                         else ""])
        ways = f"{self.fused_rate:,.0f}/s per example fused" + (
            f", {self.vectorized_rate:,.0f}/s vectorized" if self.vectorized_rate else "")
        return ([f"stages ({self.label}, one thread; each row adds one step to the chain):"]
                + ["  " + line for line in align_table(rows, right=range(1, 4))]
                + [f"  ideal = best single-thread map ({ways}) x {self.cores} cores = {self.ideal:,.0f} examples/s"
                   + (" (pinned rows: x their cores)" if pinned else "")])

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return {"label": self.label, "features": dict(self.features), "batch_size": self.batch_size,
                "cores": self.cores, "limiting": self.limiting,
                "fused_rate": self.fused_rate, "vectorized_rate": self.vectorized_rate, "ideal": self.ideal,
                "stages": [{"name": n, "examples_per_s": r, "added_ms_per_example": a}
                           for n, r, a in zip(self.names, self.rates, self.added_ms)]}
