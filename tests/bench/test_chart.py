"""bench/chart.py: the PNG of a run, bars per variant or grouped by core count, with each limit drawn (pure)."""

import dataclasses

import matplotlib.image

from tests.bench.support import PNG_MAGIC, result

REFS = {"naive": "naive", "optimized": "naive"}


def test_plot_writes_a_png_with_the_limit_of_each_stage_report(tmp_path):
    run = result({"naive": [1.0, 2.0], "optimized": [0.5, 0.5]}, REFS)
    path = str(tmp_path / "bench.png")
    run.plot(path)
    with open(path, "rb") as f:
        assert f.read(8) == PNG_MAGIC
    height, width, _ = matplotlib.image.imread(path).shape
    assert width > 400 and height > 300
    from tfpipe.bench.chart import figure

    legend = [t.get_text() for t in figure(run).axes[0].get_legend().get_texts()]
    assert "features limit, audio features: 333/s" in legend  # the limiting stage names the line


def test_with_core_counts_bars_are_grouped_and_labelled_with_the_speedup(tmp_path):
    base = result({"naive": [1.0, 1.0], "optimized": [0.5, 0.5]}, REFS, cores=[1, 2])
    variants = tuple(dataclasses.replace(v, cores=c, pinned=True, speedup=float(c), ideal=100.0 * c)
                     for v in base.variants for c in (1, 2))
    run = dataclasses.replace(base, variants=variants)
    from tfpipe.bench.chart import figure

    fig = figure(run)
    assert [t.get_text() for t in fig.axes[0].texts] == ["2.00x", "2.00x"]  # the second count of each variant
    assert "limit for that many cores" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    run.plot(str(tmp_path / "cores.png"))
    assert (tmp_path / "cores.png").read_bytes()[:8] == PNG_MAGIC
