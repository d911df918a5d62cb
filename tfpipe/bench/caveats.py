"""When a bench run cannot be trusted, and how much data it would need: said in the table, JSON and chart.

A run misleads when its epochs are a few batches (once-per-epoch work, such as a whole-set
shuffle refilling, lands in every turn), when its rounds disagree by more than the
differences it reports, or when a row that cannot differ (a no-op toggle) moves anyway:
the noise is at least that large. Pure: reads a BenchResult's numbers only.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

MIN_EPOCH_BATCHES = 20  # fewer batches per epoch: once-per-epoch work weighs on every turn
MIN_ROUNDS = 3  # fewer rounds: no spread to tell a difference from noise
_ABOVE_LIMIT = 1.05  # a median this far above its limit: the one-thread timing ran slow


def noise_floor(variants: Sequence[Any]) -> float:
    """How far (as a ratio, e.g. 1.39) a row that cannot differ from its reference moved: the run's noise."""
    moved = [abs(math.log(v.stats.ratio)) for v in variants
             if v.note.startswith("no-op") and v.reference != v.name and v.stats.ratio > 0]
    return math.exp(max(moved, default=0.0))


def within_noise(v: Any, floor: float = 1.0) -> bool:
    """The row differs from its reference by no more than its rounds disagree, or than a no-op row moved.

    Args:
      v: a VariantResult.
      floor: `noise_floor` of the run.
    """
    ratios = v.stats.ratios
    if v.reference == v.name or len(ratios) < 2 or v.note.startswith("no-op"):  # a no-op row says so itself
        return False
    differ = abs(math.log(v.stats.ratio))
    spread = (math.log(max(ratios)) - math.log(min(ratios))) / 2
    return min(ratios) <= 1.0 <= max(ratios) or differ <= spread or differ <= math.log(floor)


def caveats(settings: Any, variants: Sequence[Any]) -> list[str]:
    """Why the run may mislead, each with what to do; empty when nothing says so.

    Args:
      settings: the BenchResult's settings (epoch_batches, repeats, batch_size, num_examples).
      variants: its VariantResults.
    """
    out = _small_epochs(settings, variants)
    if settings["repeats"] < MIN_ROUNDS and len(variants) > 1:
        out.append(f"{settings['repeats']} round(s): too few to tell a difference from noise; "
                   f"use --repeats {MIN_ROUNDS * 2 - 1} or more")
    floor = noise_floor(variants)
    noisy = [v.key for v in variants if within_noise(v, floor)]
    if noisy:
        out.append(f"{len(noisy)} of {len(variants)} rows differ from their reference by less than the rounds "
                   f"disagree (marked ~ in the table): {', '.join(noisy[:6])}{', ...' if len(noisy) > 6 else ''}; "
                   f"treat them as equal, or time longer: {_enough(settings)}")
    if floor > 1.05:
        out.append(f"rows whose change cannot matter here (no-op) moved up to {floor:.2f}x: differences below that "
                   f"are noise in this run; {_enough(settings)}")
    out += [f"{v.key} ran at {v.share_of_ideal:.0%} of its limit: the one-thread stage timing ran slower than the "
            f"chain did (a busy machine, frequency scaling); rerun with --stage_seconds 2 on a quiet machine"
            for v in variants if v.share_of_ideal and v.share_of_ideal > _ABOVE_LIMIT]
    return out


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


def _enough(settings: Any) -> str:
    """What a run needs to be read with confidence: rounds and examples."""
    examples = MIN_EPOCH_BATCHES * settings["batch_size"]
    return (f"--repeats {max(2 * MIN_ROUNDS - 1, settings['repeats'] + 2)}, --turn_seconds "
            f"{max(2.0, 2 * (settings.get('turn_seconds') or 0)):g} and at least {examples:,} examples")
