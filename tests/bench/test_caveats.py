"""bench/caveats.py: a run too small or too noisy to trust says so, with the data it would need (pure)."""

import json

import pytest

from tests.bench.support import result
from tfpipe.bench import caveats

REFS = {"optimized": "optimized", "optimized:fuse_maps=false": "optimized",
        "optimized:prefetch_to_device=false": "optimized", "optimized:vectorize=false": "optimized"}
NO_GPU = {"optimized:prefetch_to_device=false": "no-op: no GPU visible"}


def _ablation(epoch_batches, repeats=3, fuse=(1 / 0.9, 1 / 2.15, 1 / 3.0), no_op=(1 / 1.39, 1 / 1.3, 1 / 1.45)):
    """The issue's run: 160 clips in batches of 64; fuse_maps=false 2.15x in the median, a no-op row 1.39x."""
    seconds = {"optimized": [1.0] * repeats, "optimized:fuse_maps=false": list(fuse)[:repeats],
               "optimized:prefetch_to_device=false": list(no_op)[:repeats],
               "optimized:vectorize=false": [1 / 0.5] * repeats}  # consistently half as fast: a real difference
    epochs = {name: epoch_batches for name in seconds}
    return result(seconds, REFS, NO_GPU, batch_size=64, num_examples=160, epoch_batches=epochs, repeats=repeats,
                  turn_seconds=1.0)


def test_a_run_of_a_few_batches_an_epoch_says_so_and_how_much_data_it_needs():
    found = caveats.caveats(_ablation(epoch_batches=2).settings, _ablation(epoch_batches=2).variants)
    small = next(c for c in found if c.startswith("an epoch is only"))
    assert "2 batch(es) of 64" in small and "20 batches an epoch: 1,280 examples at batch 64" in small
    assert not any(c.startswith("an epoch is only") for c in caveats.caveats(
        _ablation(epoch_batches=31).settings, _ablation(epoch_batches=31).variants))


def test_rows_within_the_noise_are_marked_and_a_no_op_row_sets_the_floor():
    run = _ablation(epoch_batches=2)
    by_name = {v.name: v for v in run.variants}
    assert caveats.noise_floor(run.variants) == pytest.approx(1.39)
    # fuse_maps=false: 2.15x in the median, but its rounds say 0.9x, 2.15x and 3x: no direction.
    assert run.within_noise(by_name["optimized:fuse_maps=false"])
    assert not run.within_noise(by_name["optimized:vectorize=false"])  # 0.5x in every round
    text = run.table()
    assert next(line for line in text.splitlines() if line.startswith("optimized:fuse_maps=false")).count(" ~") == 1
    assert "caution: rows whose change cannot matter here (no-op) moved up to 1.39x" in text
    assert "caution: 1 of 4 rows differ from their reference by less than the rounds disagree" in text
    data = json.loads(run.to_json())
    assert [v["within_noise"] for v in data["variants"]] == [False, True, False, False]
    assert any("1,280 examples" in c for c in data["caveats"])
    # A consistent ratio a no-op row has not matched is no noise; nor is one round's ratio (no spread to judge).
    steady = _ablation(31, repeats=5, fuse=[1 / 2.1, 1 / 2.2, 1 / 2.15, 1 / 2.0, 1 / 2.3], no_op=[1.0] * 5)
    assert not any(steady.within_noise(v) for v in steady.variants) and steady.caveats == []
    single = _ablation(31, repeats=1)
    assert not any(single.within_noise(v) for v in single.variants)
    assert any(c.startswith("1 round(s): too few") for c in single.caveats)


def test_a_variant_above_its_limit_says_the_one_thread_timing_ran_slow():
    run = result({"naive": [1.0] * 5, "optimized": [0.1] * 5}, {"naive": "naive", "optimized": "naive"}, repeats=5)
    (above,) = [c for c in run.caveats if "of its limit" in c]  # 1000/s against a limit of 333/s
    assert above.startswith("optimized ran at 300% of its limit") and "--stage_seconds 2" in above


def test_the_chart_prints_the_caveats_under_the_bars(tmp_path):
    from tfpipe.bench.chart import figure

    fig = figure(_ablation(epoch_batches=2))
    text = "\n".join(t.get_text() for t in fig.texts)
    assert "caution: an epoch is only 2 batch(es) of 64" in text
    ax = fig.axes[0]
    assert [p.get_hatch() for p in ax.patches[:4]] == [None, "..", "//", None]  # within noise dotted, no-op hatched
