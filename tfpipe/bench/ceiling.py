"""How many cores a chain can use: its per-element ceiling, from its ops timed on one thread.

A tf.data chain spreads a parallel map (or interleave) over the cores it is given; every other
op (the source, a sequential map, shuffle, batch, prefetch, ...) does its per-element work on
one thread, whatever the host. The op with the most such work per example is the chain's
ceiling: the most examples/s it can make with any number of cores. Divided by what the chain
makes per core now, it says how many cores the chain can use before that op caps it, so a user
knows whether a bigger host helps before renting one:

    can use up to N cores = ceiling rate / (measured examples/s / cores it ran on)

The one-thread costs are `ops.measure_ops`' (each prefix of the final chain timed alone, the
difference between neighbours being what an op adds per example). Pure: reads an OpsReport.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional


@dataclasses.dataclass(frozen=True)
class Ceiling:
    """A variant's per-element ceiling.

    Attributes:
      variant: the variant's name.
      fixed_us: microseconds per example its one-thread ops add together (its fixed cost per
        element on one thread; the parallel maps' work is not in it).
      rate: examples/s its slowest one-thread op allows: the ceiling (inf: nothing measurable).
      limiting: that op, e.g. 'ShuffleDataset' or 'MapDataset "decode"' ("" when none).
    """

    variant: str
    fixed_us: float
    rate: float
    limiting: str = ""

    @classmethod
    def from_ops(cls, report: Any, variant: str) -> "Ceiling":
        """The ceiling of the chain an OpsReport timed (its ops that do not run in parallel)."""
        serial = [(report.label(i), cost) for i, (op, cost) in enumerate(zip(report.ops, report.added_ms))
                  if not op.parallel]
        fixed_ms = sum(cost for _, cost in serial)
        label, worst = max(serial, key=lambda s: s[1], default=("", 0.0))
        return cls(variant, 1000.0 * fixed_ms, 1000.0 / worst if worst > 0 else math.inf, label if worst > 0 else "")

    def usable_cores(self, measured: float, cores: Optional[int]) -> Optional[float]:
        """Cores the chain can use before its ceiling caps it: ceiling / (measured / cores); None if unknown."""
        if not cores or measured <= 0 or not math.isfinite(self.rate):
            return None
        return self.rate / (measured / cores)

    def to_dict(self, measured: float, cores: Optional[int]) -> dict[str, Any]:
        """Plain dict for JSON, with the cores this row (its rate, its cores) can use."""
        return {"fixed_us_per_example": self.fixed_us, "rate": None if math.isinf(self.rate) else self.rate,
                "limiting": self.limiting, "usable_cores": self.usable_cores(measured, cores)}

    def line(self, measured: float, cores: Optional[int], name: str) -> str:
        """One line of the report: the fixed cost, the ceiling and what it means for more cores."""
        if not math.isfinite(self.rate):
            return (f"{name}: no one-thread op adds measurable time per example ({self.fixed_us:.1f} µs in all): "
                    f"its parallel maps decide, and they scale with the cores")
        head = (f"{name}: {self.fixed_us:,.1f} µs an example on one thread outside its parallel maps; "
                f"ceiling {self.rate:,.0f}/s ({self.limiting}, one thread)")
        usable = self.usable_cores(measured, cores)
        if usable is None:
            return head
        per_core = measured / cores
        if usable <= cores * 1.1:
            return (f"{head}: at its ceiling on {cores} core(s) ({measured:,.0f}/s): more cores will not help; "
                    f"{self.limiting} is what to make cheaper")
        return f"{head}: can use up to {usable:,.0f} cores (it makes {per_core:,.0f}/s a core here)"
