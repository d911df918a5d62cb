"""bench/stages.py: the limiting stage and its limit (pure), and the stage measurement in a worker (real)."""

import pytest

from tfpipe.bench.stages import STAGE_NAMES, StageReport, added_ms
from tfpipe.domains.audio.config import AudioConfig

IMAGE = ("list", "read", "decode", "scale", "batch")
FEAT = AudioConfig(clip_seconds=0.25)


def test_stage_costs_name_the_limiting_stage_and_its_limit():
    rates = (1000.0, 500.0, 250.0, 100.0, 100.0)  # 1, 2, 4, 10, 10 ms per example cumulated
    assert added_ms(rates) == pytest.approx((1.0, 1.0, 2.0, 6.0, 0.0))
    assert added_ms((100.0, 200.0)) == pytest.approx((10.0, 0.0))  # a faster prefix (noise) adds nothing
    report = StageReport("tf", rates, fused_rate=90.0, vectorized_rate=120.0, cores=2)
    assert report.limiting == "features" and report.limiting_rate == pytest.approx(1000 / 6)
    assert report.ideal == pytest.approx(2000 / 6)  # the limiting stage alone, on every core
    assert report.linear == 240.0  # the whole chain's best one-thread rate x the cores: a lower figure


def test_the_decode_limit_of_images_counts_the_batched_stage_at_its_batched_cost():
    # decode adds 0.8 ms an example; scale 0.25 ms per example, but 0.05 ms on whole batches.
    report = StageReport("image features", (10_000.0, 5000.0, 1000.0, 800.0, 790.0), fused_rate=700.0,
                         vectorized_rate=950.0, cores=2, names=IMAGE, batched=1)
    assert report.on_batches_ms == pytest.approx(1000 / 950 - 1.0)
    assert [(name, on_batches) for name, _, on_batches in report.units] == [
        ("list", False), ("read", False), ("decode", False), ("scale", True)]
    assert report.limiting == "decode" and report.ideal == pytest.approx(2 * 1250.0)  # the decode limit
    text = "\n".join(report.table_lines())
    assert "limit = decode alone on one thread (1,250/s) x 2 cores = 2,500 examples/s" in text
    assert "scale + batch on whole batches (vectorize): 0.053 ms/example" in text
    assert "whole chain on one thread: 700/s fused, 950/s vectorized; x 2 cores = 1,900/s" in text
    data = report.to_dict()
    assert (data["limiting"], data["batched"], data["linear"]) == ("decode", 1, 1900.0)


def test_a_batched_tail_can_be_the_limit_itself():
    # Audio: decode and features run on whole batches at 0.15 ms an example, the most of any step.
    report = StageReport("audio features", (40_000.0, 20_000.0, 10_000.0, 1000.0, 950.0), fused_rate=900.0,
                         vectorized_rate=5000.0, cores=2, batched=2)
    assert report.limiting == "decode + features" and report.ideal == pytest.approx(2000 / 0.15)
    (line,) = [line for line in report.table_lines() if "limits the pipeline" in line]
    assert line.strip().startswith("decode + features + batch on whole batches")


def test_stage_measurement_follows_the_sources_own_stages(tiny, tiny_shards):
    from tfpipe.bench import worker

    (wav,) = worker._stages({}, {"data": tiny}, [("audio features", FEAT, 4)], budget_s=0.03)
    assert wav["names"] == STAGE_NAMES and len(wav["rates"]) == 5 and wav["vectorized_rate"] > 0
    assert wav["batched"] == 3  # read, decode and features run on whole batches when vectorized
    # A v2 shard folder: its files expand into parsed blocks of records, then the float16 -> float32
    # cast (batchable) runs on whole batches.
    (shards,) = worker._stages({}, {"data": tiny_shards}, [("shards", FEAT, 4)], budget_s=0.03)
    assert shards["names"] == ("list", "records", "cast", "batch") and len(shards["rates"]) == 4
    report = StageReport(cores=2, **shards)
    assert report.limiting.split(" + ")[0] in report.names and report.ideal > 0
