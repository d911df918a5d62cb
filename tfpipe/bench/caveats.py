"""When a bench run cannot be trusted, and how much data it would need: said in the table, JSON and chart.

A run misleads when its epochs are a few batches (once-per-epoch work, such as a whole-set
shuffle refilling, lands in every turn), when its rounds disagree by more than the
differences it reports, or when a row that cannot differ (a no-op toggle) moves anyway:
the noise is at least that large. Pure: reads a BenchResult's numbers only.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Optional, Sequence

MIN_EPOCH_BATCHES = 20  # fewer batches per epoch: once-per-epoch work weighs on every turn
MIN_ROUNDS = 3  # fewer rounds: no spread to tell a difference from noise
# A run this long settles the question: a row still within the noise after it is a tie, and the
# bench asks for no longer run (every caution asks for this one run, never "a bit more" again).
SETTLE_ROUNDS = 9
SETTLE_TURN_SECONDS = 2.0
MAX_ROUNDS = 25  # two rows that need more rounds than this to be told apart are equal for any use
_ABOVE_LIMIT = 1.05  # a median this far above its limit: the one-thread timing ran slow
_Z = 2.0  # standard errors a difference must exceed (~95%)


def noise_floor(variants: Sequence[Any]) -> float:
    """How far (as a ratio, e.g. 1.39) a row that cannot differ from its reference moved: the run's noise."""
    moved = [abs(math.log(v.stats.ratio)) for v in variants
             if v.note.startswith("no-op") and v.reference != v.name and v.stats.ratio > 0]
    return math.exp(max(moved, default=0.0))


def paired_logs(ratios: Sequence[float]) -> tuple[float, float]:
    """(mean, standard error) of the log of per-round ratios (standard error inf with one round)."""
    logs = [math.log(r) for r in ratios if r > 0]
    if len(logs) < 2:
        return (logs[0] if logs else 0.0), math.inf
    return statistics.fmean(logs), statistics.stdev(logs) / math.sqrt(len(logs))


def separated(ratios: Sequence[float], floor: float = 1.0) -> bool:
    """Per-round ratios of A to B tell A and B apart: their mean log is beyond 2 standard errors and the floor."""
    mean, error = paired_logs(ratios)
    return abs(mean) > _Z * error and abs(mean) > math.log(floor)


def rounds_needed(ratios: Sequence[float]) -> float:
    """Rounds at which these per-round ratios' spread would tell their difference apart (inf: no difference)."""
    mean, error = paired_logs(ratios)
    if not math.isfinite(error):
        return math.inf
    spread = error * math.sqrt(len(ratios))
    return math.ceil((_Z * spread / abs(mean)) ** 2) if mean else math.inf


def within_noise(v: Any, floor: float = 1.0, reference_median: Optional[float] = None) -> bool:
    """The row cannot be told apart from its reference in this run.

    Either its rounds disagree more than it differs (the mean of the per-round log ratios is
    within 2 standard errors), or a no-op row moved as much, or the median rates and the
    round-by-round ratio disagree on which is faster (then neither number names a winner).

    Args:
      v: a VariantResult.
      floor: `noise_floor` of the run.
      reference_median: the reference's median examples/s, to check the direction against.
    """
    ratios = v.stats.ratios
    if v.reference == v.name or len(ratios) < 2 or v.note.startswith("no-op"):  # a no-op row says so itself
        return False
    if reference_median is not None and (v.stats.ratio - 1.0) * (v.stats.median - reference_median) < 0:
        return True
    return not separated(ratios, floor)


def row_within_noise(v: Any, variants: Sequence[Any], floor: Optional[float] = None) -> bool:
    """`within_noise` of a row of a run, checked against its reference row's median (same core count)."""
    reference = next((r for r in variants if r.name == v.reference and r.cores == v.cores), None)
    return within_noise(v, noise_floor(variants) if floor is None else floor,
                        reference.stats.median if reference is not None else None)


def caveats(settings: Any, variants: Sequence[Any]) -> list[str]:
    """Why the run may mislead, each with what to do; empty when nothing says so.

    What to do is one run that settles the question (SETTLE_ROUNDS rounds or what the spread
    needs), so a run that followed it is never asked for more: its ties are ties.

    Args:
      settings: the BenchResult's settings (epoch_batches, repeats, batch_size, num_examples).
      variants: its VariantResults.
    """
    out = _small_epochs(settings, variants)
    if settings["repeats"] < MIN_ROUNDS and len(variants) > 1:
        out.append(f"{settings['repeats']} round(s): too few to tell a difference from noise; "
                   f"use {_settle(settings, SETTLE_ROUNDS)}")
    floor = noise_floor(variants)
    noisy = [v for v in variants if row_within_noise(v, variants, floor)]
    settled = settings["repeats"] >= SETTLE_ROUNDS
    if noisy:
        names = ", ".join(v.key for v in noisy[:6]) + (", ..." if len(noisy) > 6 else "")
        head = (f"{len(noisy)} of {len(variants)} rows differ from their reference by less than the rounds "
                f"disagree (marked ~ in the table): {names}; ")
        needed = [rounds_needed(v.stats.ratios) for v in noisy]
        tie = max(math.exp(_Z * paired_logs(v.stats.ratios)[1]) for v in noisy)
        if settled or min(needed) > MAX_ROUNDS:
            out.append(head + f"after {settings['repeats']} rounds that is a tie: on this machine they are within "
                       f"{_percent(tie)} of each other, and a longer run will not separate them")
        else:
            rounds = max([SETTLE_ROUNDS] + [n for n in needed if n <= MAX_ROUNDS])
            out.append(head + f"treat them as equal, or settle it with one longer run: {_settle(settings, rounds)} "
                       f"(what this run's spread needs; a row still ~ after it is a tie)")
    if floor > 1.05:
        out.append(f"rows whose change cannot matter here (no-op) moved up to {floor:.2f}x: differences below that "
                   f"are noise in this run; " + ("read them as ties (this run is as long as it needs)" if settled
                                                 else f"one run of {_settle(settings, SETTLE_ROUNDS)} settles it"))
    out += [f"{v.key} ran at {v.share_of_ideal:.0%} of its limit: the one-thread stage timing ran slower than the "
            f"chain did (a busy machine, frequency scaling); rerun with --stage_seconds 2 on a quiet machine"
            for v in variants if v.share_of_ideal and v.share_of_ideal > _ABOVE_LIMIT]
    return out


def _percent(ratio: float) -> str:
    """1.034 -> "±3.4%"."""
    return f"±{(ratio - 1) * 100:.1f}%" if math.isfinite(ratio) else "an unknown margin"


def _small_epochs(settings: Any, variants: Sequence[Any]) -> list[str]:
    """The variants whose epoch is under MIN_EPOCH_BATCHES batches, and the data they would need."""
    epochs = settings.get("epoch_batches") or {}
    small = {v.name: epochs[v.name] for v in variants if (epochs.get(v.name) or MIN_EPOCH_BATCHES) < MIN_EPOCH_BATCHES}
    if not small:
        return []
    fewest = min(small.values())
    batch = settings["batch_size"]
    return [f"an epoch is only {fewest} batch(es) of {batch} for {', '.join(small)}: once-per-epoch work (a "
            f"whole-set shuffle refilling, files listed again, the first batch after each repeat) lands in every "
            f"turn and rows differ by chance; give it at least {MIN_EPOCH_BATCHES} batches an epoch: "
            f"{MIN_EPOCH_BATCHES * batch:,} examples at batch {batch} (or a smaller --batch_size)"]


def _settle(settings: Any, rounds: int) -> str:
    """The one run that settles it: `rounds` rounds of turns long enough, on enough data."""
    examples = MIN_EPOCH_BATCHES * settings["batch_size"]
    turn = "" if settings.get("batches") else \
        f" --turn_seconds {max(SETTLE_TURN_SECONDS, settings.get('turn_seconds') or 0):g}"
    data = f" on at least {examples:,} examples" if (settings.get("num_examples") or examples) < examples else ""
    return f"--repeats {max(rounds, settings['repeats'])}{turn}{data}"
