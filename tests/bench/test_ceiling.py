"""bench/ceiling.py: a chain's per-element ceiling from its one-thread ops, and the cores it can use (pure)."""

import dataclasses
import json
import math

import pytest

from tests.bench.support import result
from tfpipe.bench.ceiling import Ceiling
from tfpipe.bench.ops import OpRate, OpsReport


def _report(shuffle_rate=20_000.0):
    """range 0.01 ms, a parallel decode map 1 ms, shuffle and batch on one thread after it."""
    return OpsReport("optimized", (OpRate("RangeDataset", "", 100_000.0),
                                   OpRate("ParallelMapDatasetV2", "decode", 1000 / 1.01, True, 2),
                                   OpRate("ShuffleDataset", "", 1000 / (1.01 + 1000 / shuffle_rate)),
                                   OpRate("BatchDatasetV2", "", 1000 / (1.01 + 1000 / shuffle_rate + 0.005))), 2)


def test_the_ceiling_is_the_slowest_one_thread_op_and_the_fixed_cost_their_sum():
    ceiling = Ceiling.from_ops(_report(), "optimized")
    assert ceiling.limiting == "ShuffleDataset" and ceiling.rate == pytest.approx(20_000, rel=1e-6)
    assert ceiling.fixed_us == pytest.approx(10 + 50 + 5, rel=1e-6)  # range + shuffle + batch; not the decode
    # 2 cores make 1,800/s (900 a core): 20,000 / 900 = 22 cores before the shuffle caps it.
    assert ceiling.usable_cores(1800.0, 2) == pytest.approx(20_000 / 900)
    assert ceiling.line(1800.0, 2, "optimized") == (
        "optimized: 65.0 µs an example on one thread outside its parallel maps; ceiling 20,000/s (ShuffleDataset, "
        "one thread): can use up to 22 cores (it makes 900/s a core here)")
    assert ceiling.to_dict(1800.0, 2) == {"fixed_us_per_example": pytest.approx(65.0), "rate": pytest.approx(20_000),
                                          "limiting": "ShuffleDataset", "usable_cores": pytest.approx(20_000 / 900)}


def test_a_chain_at_its_ceiling_is_told_more_cores_will_not_help():
    naive = OpsReport("naive", (OpRate("TensorSliceDataset", "", 100_000.0), OpRate("MapDataset", "decode", 990.0)), 2)
    ceiling = Ceiling.from_ops(naive, "naive")
    assert ceiling.limiting == 'MapDataset "decode"' and ceiling.usable_cores(980.0, 2) == pytest.approx(2.04, abs=0.01)
    assert ceiling.line(980.0, 2, "naive").endswith(
        "at its ceiling on 2 core(s) (980/s): more cores will not help; MapDataset \"decode\" is what to make cheaper")
    free = Ceiling.from_ops(OpsReport("x", (OpRate("ParallelMapDatasetV2", "", 500.0, True, 2),), 2), "x")
    assert math.isinf(free.rate) and free.usable_cores(500.0, 2) is None and "scale with the cores" in free.line(
        500.0, 2, "x")


def test_the_report_shows_each_rows_ceiling_in_the_table_and_json():
    run = result({"naive": [1.0, 1.0], "optimized": [0.1, 0.1]}, {"naive": "naive", "optimized": "naive"})
    ceiling = Ceiling.from_ops(_report(), "optimized")
    run = dataclasses.replace(run, variants=(run.variants[0], dataclasses.replace(run.variants[1], ceiling=ceiling)))
    text = run.table()
    assert "per-element ceiling (the ops that run on one thread, timed alone" in text
    assert "  optimized: 65.0 µs an example on one thread" in text and "can use up to 40 cores" in text  # 500/s a core
    data = json.loads(run.to_json())
    assert data["variants"][0]["ceiling"] is None
    assert data["variants"][1]["ceiling"]["usable_cores"] == pytest.approx(40.0)
