"""bench/report.py: round statistics, the JSON schema and the table, from hand-made turns (pure)."""

import json

import pytest

from tests.bench.support import (MACHINE_KEYS, SETTINGS_KEYS, STAGE_KEYS, TOP_KEYS, VARIANT_KEYS, result, turns)
from tfpipe.bench.report import STAGE_NAMES, RoundStats, round_stats

REFS = {"naive": "naive", "optimized": "naive"}


def test_round_stats_takes_ratios_within_rounds_then_the_median():
    stats = round_stats({"a": turns([1.0, 2.0, 0.5]),  # 100, 50, 200 examples/s
                         "b": turns([0.5, 1.0, 0.5])}, {"a": "a", "b": "a"})  # 200, 100, 200 examples/s
    assert stats["a"] == RoundStats((100.0, 50.0, 200.0), 100.0, 50.0, 200.0, 1.0, (1.0, 1.0, 1.0))
    assert stats["b"].rates == (200.0, 100.0, 200.0)
    assert (stats["b"].median, stats["b"].min, stats["b"].max) == (200.0, 100.0, 200.0)
    assert stats["b"].ratios == (2.0, 2.0, 1.0)
    assert stats["b"].ratio == 2.0  # median of the per-round ratios, not median(b) / median(a) (= 2 by chance only)


def test_round_stats_ratio_cancels_a_slow_round():
    # Rounds 2 and 4 are 10x slower for everyone (drift); per round the ratio is exactly 2 regardless.
    stats = round_stats({"a": turns([1.0, 10.0, 1.0, 10.0]), "b": turns([0.5, 5.0, 0.5, 5.0])}, {"a": "a", "b": "a"})
    assert stats["b"].ratio == pytest.approx(2.0)
    uneven = {"a": turns([1.0, 10.0, 10.0]), "b": turns([0.5, 5.0, 1.0])}
    assert round_stats(uneven, {"a": "a", "b": "a"})["b"].ratio == pytest.approx(2.0)  # ratios 2, 2, 10
    with pytest.raises(ValueError, match="rounds"):
        round_stats({"a": turns([1.0, 1.0]), "b": turns([1.0])}, {"a": "a", "b": "a"})


def test_json_schema_is_stable():
    data = json.loads(result({"naive": [1.0, 2.0], "optimized": [0.5, 0.5]}, REFS).to_json())
    assert set(data) == TOP_KEYS
    assert (data["format"], data["version"]) == ("tfpipe-bench", 5)
    assert set(data["settings"]) == SETTINGS_KEYS and set(data["machine"]) == MACHINE_KEYS
    assert set(data["variants"][0]) == VARIANT_KEYS
    assert set(data["variants"][0]["examples_per_s"]) == {"median", "min", "max", "rounds"}
    assert set(data["variants"][0]["config"]) == {"pipeline", "features"}
    assert set(data["stages"][0]) == STAGE_KEYS
    assert [s["name"] for s in data["stages"][0]["stages"]] == list(STAGE_NAMES)
    optimized = data["variants"][1]
    assert optimized["ratio"] == 3.0  # rounds: 200/100 and 200/50 -> median of 2 and 4
    # The stages' limit: features adds 6 ms an example, the most: 1000/6 x 2 cores.
    assert data["stages"][0]["limiting"] == "features" and data["stages"][0]["ideal"] == pytest.approx(2000 / 6)
    assert optimized["share_of_ideal"] == pytest.approx(200 / (2000 / 6))
    assert (optimized["cores"], optimized["examples_per_s_per_core"], optimized["speedup"]) == (2, 100.0, None)
    assert optimized["padding_share"] is None and optimized["within_noise"] is False
    assert data["caveats"] == [c for c in data["caveats"] if "round" in c]  # 2 rounds: the one caveat


def test_table_shows_every_variant_ratio_the_limit_and_what_to_do():
    text = result({"naive": [1.0, 2.0], "optimized": [0.5, 0.5]}, REFS).table()
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("variant"))
    assert all(col in header for col in ("examples/s", "per core", "min-max", "vs reference", "first batch",
                                         "peak RSS", "% limit"))
    assert "padding" not in header  # no variant pads its batches
    optimized = next(line for line in lines if line.startswith("optimized"))
    assert "3.00x naive" in optimized and "60%" in optimized
    assert optimized.split()[1:3] == ["200", "100"]  # median, then per core (2 cores)
    assert "features" in next(line for line in lines if "limits the pipeline" in line)
    assert "limit = features alone on one thread (167/s) x 2 cores = 333 examples/s" in text
    assert "what to do: computing the features limits it" in text
    assert "caution: 2 round(s)" in text
    step_text = result({"naive": [1.0, 2.0], "optimized": [0.5, 0.5]}, REFS, step_ms=50.0).table()
    assert "input wait" in step_text and "max(input, step)" in step_text


def test_a_padded_variant_gets_a_padding_column():
    import dataclasses

    base = result({"naive": [1.0, 2.0], "optimized": [0.5, 0.5]}, REFS)
    padded = dataclasses.replace(base, variants=(base.variants[0], dataclasses.replace(base.variants[1],
                                                                                        padding_share=0.25)))
    lines = padded.table().splitlines()
    assert "padding" in next(line for line in lines if line.startswith("variant"))
    assert "25%" in next(line for line in lines if line.startswith("optimized"))
    assert json.loads(padded.to_json())["variants"][1]["padding_share"] == 0.25
