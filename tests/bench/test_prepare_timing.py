"""bench/prepare_timing.py: `tfpipe bench --prepare` times write_shards per worker count (real writes)."""

import json

import pytest

from tests.bench.conftest import FEAT
from tfpipe import bench


def test_prepare_times_each_worker_count(tiny):
    result = bench.run_prepare(tiny, workers=(0, 1), repeats=1, num_shards=2, features=FEAT, progress=False)
    assert set(result.seconds) == {0, 1} and all(len(s) == 1 and s[0] > 0 for s in result.seconds.values())
    assert all(0 < w[0] <= s[0] for w, s in zip(result.writing_seconds.values(), result.seconds.values()))
    data = json.loads(result.to_json())
    assert [w["num_workers"] for w in data["workers"]] == [0, 1]
    assert set(data["workers"][0]) == {"num_workers", "seconds", "median_s", "examples_per_s", "speedup",
                                       "writing_seconds", "writing_examples_per_s", "writing_speedup"}
    assert data["workers"][0]["speedup"] == 1.0 and data["settings"]["num_examples"] == 18
    assert data["workers"][1]["speedup"] == pytest.approx(result.seconds[0][0] / result.seconds[1][0])
    assert "speedup" in result.table()
    with pytest.raises(ValueError, match=r"workers=\[\], repeats=3: need worker counts >= 0"):
        bench.run_prepare(tiny, workers=(), progress=False)
