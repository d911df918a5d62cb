"""bench/caveats.py: a run too small or too noisy to trust says so, with the data it would need (pure)."""

import dataclasses
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


def test_a_noisy_run_asks_once_for_the_run_that_settles_it_and_that_run_asks_for_nothing_more():
    # 3 rounds: fuse_maps=false is within the noise; the caution names one run (>= 9 rounds, 2 s turns).
    short = _timed_turns(_ablation(31, repeats=3), 1.0)
    (noisy,) = [c for c in short.caveats if "rows differ from their reference" in c]
    assert "settle it with one longer run: --repeats 9 --turn_seconds 2" in noisy
    assert "a row still ~ after it is a tie" in noisy
    # The user follows it: 9 rounds of 2 s turns. A real difference now shows (the same spread, 3x the rounds)...
    resolved = _timed_turns(_ablation(31, repeats=9, fuse=[1 / 0.9, 1 / 2.15, 1 / 3.0] * 3,
                                      no_op=[1.0] * 9), 2.0)
    assert not any(resolved.within_noise(v) for v in resolved.variants) and resolved.caveats == []
    # ...and rows that are really equal are a tie, with no caution asking for more.
    settled = _timed_turns(_ablation(31, repeats=9, fuse=[1 / 0.97, 1 / 1.04, 1 / 1.0] * 3,
                                     no_op=[1 / 1.39, 1 / 1.3, 1 / 1.45] * 3), 2.0)
    assert settled.within_noise(next(v for v in settled.variants if v.name == "optimized:fuse_maps=false"))
    text = "\n".join(settled.caveats)
    assert "after 9 rounds that is a tie: on this machine they are within" in text
    assert "--repeats" not in text and "--turn_seconds" not in text and "longer run will not separate them" in text
    assert "read them as ties (this run is as long as it needs)" in text
    # Too few rounds asks for the same settling run, not for a few more.
    assert any(c.startswith("1 round(s): too few") and "--repeats 9" in c for c in _ablation(31, repeats=1).caveats)


def _timed_turns(run, turn_seconds):
    """The run as if timed in turns of whole epochs lasting `turn_seconds` (no --batches)."""
    return dataclasses.replace(run, settings={**run.settings, "batches": None, "turn_seconds": turn_seconds})


def test_a_row_whose_median_and_ratio_point_different_ways_is_within_the_noise():
    run = _ablation(31, repeats=5, fuse=[1 / 2.1, 1 / 2.2, 1 / 2.15, 1 / 2.0, 1 / 2.3], no_op=[1.0] * 5)
    fuse = next(v for v in run.variants if v.name == "optimized:fuse_maps=false")
    assert not caveats.within_noise(fuse, 1.0, reference_median=fuse.stats.median / 2)  # both say: faster
    assert caveats.within_noise(fuse, 1.0, reference_median=fuse.stats.median * 1.1)  # the medians say: slower
