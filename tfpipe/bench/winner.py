"""Which variant won a bench run, said plainly, from the same numbers the table shows.

The fastest row is the one with the highest median examples/s; it *won* only where the rounds
agree: against every other row, the per-round ratios (the same within-round pairing as the
"vs reference" column) must be above 1 in the median and beyond the run's noise
(`caveats.separated`). Rows it cannot be told apart from tie with it, and the line says so,
naming which way the medians and the rounds lean when they disagree. A reference recipe
(keras, tf-models) or a user's own input_fn that beats tfpipe's best is named as such. With
`--cores`, one standing per core count. Pure: reads VariantResults only.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Optional, Sequence

from tfpipe.bench import caveats

# Variant kinds that are tfpipe's chain (its own, over shards, or a user's chain handed a PipelineConfig).
TFPIPE_KINDS = ("pipeline", "shards", "dataset_fn")


def paired_ratios(a: Any, b: Any) -> tuple[float, ...]:
    """a's rate / b's rate in each round (the rows were timed in the same rounds)."""
    return tuple(x.rate / y.rate for x, y in zip(a.turns, b.turns))


def is_tfpipe(v: Any) -> bool:
    """The row is tfpipe's chain (with a PipelineConfig a flagfile can carry)."""
    return v.kind in TFPIPE_KINDS and bool((v.config or {}).get("pipeline"))


@dataclasses.dataclass(frozen=True)
class Standing:
    """Who won among the rows of one core count.

    Attributes:
      cores: the core count the rows were pinned to (None: not pinned).
      fastest: the row with the highest median.
      tied: rows the rounds cannot tell apart from it (then nobody won).
      runner_up: the fastest row it beats (None: it beat nobody, or it is alone).
      ratio: median of per-round ratios fastest / runner_up.
      best_tfpipe: tfpipe's fastest row (None: no tfpipe row).
    """

    cores: Optional[int]
    fastest: Any
    tied: tuple = ()
    runner_up: Optional[Any] = None
    ratio: Optional[float] = None
    best_tfpipe: Optional[Any] = None

    @property
    def won(self) -> bool:
        """A clear winner: it beats every other row beyond the noise."""
        return not self.tied

    def text(self) -> str:
        """The line the table prints under its rows."""
        where = f" at {self.cores} core(s)" if self.cores is not None else ""
        top = self.fastest
        if self.tied:
            rows = ", ".join(f"{v.name} ({v.stats.median:,.0f}/s)" for v in (top,) + self.tied)
            lean = [v.name for v in self.tied if statistics.median(paired_ratios(top, v)) <= 1.0]
            against = (f"; the medians put {top.name} first, but round by round {', '.join(lean)} was ahead"
                       if lean else "")
            line = (f"winner{where}: none clear: {rows} are within this run's noise of each other{against}; "
                    f"treat them as equal")
            recipes = [v for v in (top,) + self.tied if not is_tfpipe(v)]
            if recipes and self.best_tfpipe is not None and self.best_tfpipe in (top,) + self.tied:
                line += f" (this run does not show tfpipe's best, {self.best_tfpipe.name}, beating {recipes[0].name})"
            return line
        line = f"winner{where}: {top.name}, {top.stats.median:,.0f} examples/s"
        if self.runner_up is not None:
            line += f", {self.ratio:.2f}x the next fastest, {self.runner_up.name} (median of per-round ratios)"
        best = self.best_tfpipe
        if not is_tfpipe(top) and best is not None:
            who = "your own input_fn" if top.kind == "input_fn" else f"the reference recipe {top.name}"
            line += (f"; {who} beat tfpipe here: {statistics.median(paired_ratios(top, best)):.2f}x tfpipe's best, "
                     f"{best.name}")
        return line

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return {"cores": self.cores, "fastest": self.fastest.key, "won": self.won,
                "tied": [v.key for v in self.tied], "runner_up": self.runner_up and self.runner_up.key,
                "ratio": self.ratio, "best_tfpipe": self.best_tfpipe and self.best_tfpipe.key,
                "tfpipe_won": self.won and is_tfpipe(self.fastest), "text": self.text()}


def standings(variants: Sequence[Any]) -> list[Standing]:
    """One Standing per core count (one without --cores); none where a count has a single row."""
    floor = caveats.noise_floor(variants)
    groups: dict[Optional[int], list] = {}
    for v in variants:
        groups.setdefault(v.cores if v.pinned else None, []).append(v)
    return [_standing(cores, rows, floor) for cores, rows in groups.items() if len(rows) > 1]


def _standing(cores: Optional[int], rows: Sequence[Any], floor: float) -> Standing:
    """The fastest of `rows`, the rows tied with it and the next fastest it beats."""
    ranked = sorted(rows, key=lambda v: v.stats.median, reverse=True)
    top = ranked[0]
    tied, beaten = [], []
    for v in ranked[1:]:
        ratios = paired_ratios(top, v)
        clear = statistics.median(ratios) > 1.0 and caveats.separated(ratios, floor)
        (beaten if clear else tied).append(v)
    best = next((v for v in ranked if is_tfpipe(v)), None)
    runner_up = beaten[0] if beaten and not tied else None
    ratio = statistics.median(paired_ratios(top, runner_up)) if runner_up is not None else None
    return Standing(cores, top, tuple(tied), runner_up, ratio, best)
