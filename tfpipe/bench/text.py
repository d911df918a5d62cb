"""Plain-text formatting the bench's table, chart and reports share (pure: no TensorFlow)."""

from __future__ import annotations

from typing import Any, Collection, Mapping, Sequence


def align_table(rows: Sequence[Sequence[Any]], right: Collection[int] = ()) -> list[str]:
    """Rows of cells as aligned lines: columns in `right` right-aligned (numbers), the rest left."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(str(c).rjust(w) if i in right else str(c).ljust(w)
                      for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in rows]


def plural(n: int, word: str) -> str:
    """'1 round', '5 rounds'."""
    return f"{n} {word}" + ("" if n == 1 else "s")


def turn(settings: Mapping[str, Any]) -> str:
    """What one turn is, e.g. "31 batches" or "epochs (31 batches) for >= 1 s"."""
    counts = sorted(set(settings["turn_batches"].values()))
    text = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    if settings["batches"]:
        return f"{text} batches"
    seconds = settings["turn_seconds"]
    return f"epochs ({text} batches) for >= {seconds:g} s" if seconds else f"one epoch ({text} batches)"
