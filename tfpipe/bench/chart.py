"""The PNG chart of a bench run: one bar per variant, or bars grouped per variant by core count.

The limit of each measured feature config is a dashed line (for images, the decode limit);
rows within the run's noise are dotted, and the run's caveats are printed under the chart.
"""

from __future__ import annotations

import textwrap
from typing import Any

from tfpipe.bench.text import plural, turn

_PALETTE = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"]


def _figure(width: float) -> tuple[Any, Any]:
    """A figure and its axes on the Agg canvas (no display, no global backend switch)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, 6.0))
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def plot_bench(result: Any, path: str) -> None:
    """Writes the chart of a BenchResult (see `figure`) to `path` as a PNG."""
    figure(result).savefig(path, dpi=120)


def figure(result: Any) -> Any:
    """The chart: grouped by core count when the run had `--cores`, else one bar per variant."""
    return _plot_cores(result) if result.settings.get("cores") else _plot_variants(result)


def _plot_variants(result: Any) -> Any:
    """Bar chart: median examples/s per variant, min-max whiskers, the limit of each measured feature config as a line."""
    from matplotlib.patches import Patch

    variants = result.variants
    medians = [v.stats.median for v in variants]
    whiskers = [[v.stats.median - v.stats.min for v in variants],
                [v.stats.max - v.stats.median for v in variants]]
    references = set(v.reference for v in variants)
    groups = list(dict.fromkeys(v.reference for v in variants if v.name not in references))
    colors = ["#444444" if v.name in references else _PALETTE[groups.index(v.reference) % len(_PALETTE)]
              for v in variants]
    fig, ax = _figure(max(6.0, 0.45 * len(variants) + 2.5))
    bars = ax.bar(range(len(variants)), medians, yerr=whiskers, capsize=3, color=colors)
    noisy = [result.within_noise(v) for v in variants]
    for bar, v, noise in zip(bars, variants, noisy):
        if v.note.startswith("no-op"):
            bar.set_hatch("//")
        elif noise:
            bar.set_hatch("..")
    handles = [Patch(color="#444444", label="reference")]
    handles += [Patch(color=_PALETTE[i % len(_PALETTE)], label=f"compared to {g}")
                for i, g in enumerate(groups)]
    handles += [Patch(facecolor="white", edgecolor="k", hatch="//", label="no-op here (see note)")] * any(
        v.note.startswith("no-op") for v in variants)
    handles += [Patch(facecolor="white", edgecolor="k", hatch="..", label="within noise (see caution)")] * any(noisy)
    for i, rep in enumerate(result.stages):
        handles.append(ax.axhline(rep.ideal, linestyle="--", color="k" if i == 0 else "grey",
                                  label=f"{rep.limiting} limit, {rep.label}: {rep.ideal:,.0f}/s"))
    ax.legend(handles=handles, loc="upper right", fontsize=8)
    top = max([v.stats.max for v in variants] + [rep.ideal for rep in result.stages])
    ax.set_ylim(0, top * 1.2)  # room for the legend above the bars and the ideal line
    ax.set_xticks(range(len(variants)))
    ax.set_xticklabels([v.name for v in variants], rotation=60, ha="right", fontsize=8)
    return _finish(fig, ax, result)


def _plot_cores(result: Any) -> Any:
    """Grouped bars: per variant, one bar per core count, labelled with its speed-up over the first count."""
    counts = list(result.settings["cores"])
    names = list(dict.fromkeys(v.name for v in result.variants))
    width = 0.8 / len(counts)
    fig, ax = _figure(max(6.0, 0.3 * len(names) * len(counts) + 3.0))
    top = 0.0
    for j, count in enumerate(counts):
        runs = [next(v for v in result.variants if v.name == n and v.cores == count) for n in names]
        xs = [i - 0.4 + width * (j + 0.5) for i in range(len(names))]
        medians = [v.stats.median for v in runs]
        whiskers = [[v.stats.median - v.stats.min for v in runs], [v.stats.max - v.stats.median for v in runs]]
        bars = ax.bar(xs, medians, width, yerr=whiskers, capsize=2, color=_PALETTE[j % len(_PALETTE)],
                      label=f"{plural(count, 'core')}")
        for bar, v in zip(bars, runs):
            if v.speedup is not None and j:
                ax.annotate(f"{v.speedup:.2f}x", (bar.get_x() + bar.get_width() / 2, v.stats.max),
                            ha="center", va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
            if v.ideal:
                ax.hlines(v.ideal, bar.get_x(), bar.get_x() + bar.get_width(), colors="k", linestyles="--")
        top = max([top] + [v.stats.max for v in runs] + [v.ideal or 0 for v in runs])
    ax.plot([], [], "k--", label="limit for that many cores")
    ax.legend(loc="upper right", fontsize=8, title="pinned to", title_fontsize=8)
    ax.set_ylim(0, top * 1.25)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=60 if len(names) > 3 else 0, ha="right" if len(names) > 3 else "center",
                       fontsize=8)
    return _finish(fig, ax, result, " (labels: speed-up over the first count)")


def _finish(fig: Any, ax: Any, result: Any, note: str = "") -> Any:
    """Axis label, title (two lines: fits 3 bars), layout, the caveats under it; the figure."""
    ax.set_ylabel("examples/s (median of rounds; whiskers: min-max)")
    s = result.settings
    size = f"{s['num_examples']} examples, " if s.get("num_examples") is not None else ""
    ax.set_title(f"tfpipe bench: {size}batch {s['batch_size']}{note},\n"
                 f"{plural(s['repeats'], 'round')} x {turn(s)}", fontsize=10)
    cautions = result.caveats
    lines = [line for c in cautions for line in textwrap.wrap(f"caution: {c}", int(fig.get_figwidth() * 18))]
    if not lines:
        fig.tight_layout()
        return fig
    # Said under the chart too (a chart travels without its table), on a figure grown to hold them.
    text_inches = 0.13 * len(lines) + 0.1  # 7-point lines
    fig.set_figheight(fig.get_figheight() + text_inches)
    fig.text(0.01, 0.005, "\n".join(lines), ha="left", va="bottom", fontsize=7, color="#a00000")
    fig.tight_layout(rect=(0, text_inches / fig.get_figheight(), 1, 1))
    return fig
