"""bench/ops.py: per-op rates of any chain, the op that limits it, and the rewrites its options leave on."""

import dataclasses

import pytest

from tfpipe import bench
from tfpipe.bench.ops import REWRITES, OpRate, OpsReport, default_rewrites



def test_an_op_after_a_prefetch_is_not_charged_the_overlap_the_prefetch_gave():
    # A prefetch thread makes its prefix look faster (100 -> 90 µs); the repeat after it measures
    # 95 µs: it adds nothing over the map's 100 µs, not 5 µs (the wav chain's ceiling once named a
    # Repeat that adds ~0.1 µs as its limit this way).
    report = OpsReport("v", (OpRate("RangeDataset", "", 100_000.0), OpRate("ParallelMapDatasetV2", "read", 10_000.0,
                                                                          True, 2),
                             OpRate("PrefetchDataset", "", 1e6 / 90), OpRate("RepeatDataset", "", 1e6 / 95)), cores=2)
    assert report.added_ms == pytest.approx((0.01, 0.09, 0.0, 0.0))
    assert report.label(report.limiting) == 'ParallelMapDatasetV2 "read"'


def test_ops_report_credits_parallel_ops_with_their_cores():
    # 0.1, 0.9 and 0.25 ms/example added; the parallel map costs most but has 4 threads.
    report = OpsReport("v", (OpRate("RangeDataset", "", 10_000.0), OpRate("ParallelMapDatasetV2", "decode", 1000.0,
                                                                         True, 4),
                             OpRate("MapDataset", "post", 800.0)), cores=4, rewrites=("inject_prefetch",))
    assert report.added_ms == pytest.approx((0.1, 0.9, 0.25))
    assert report.capacities == pytest.approx((10_000.0, 4000 / 0.9, 4000.0))
    assert report.limiting == 2 and report.label(2) == 'MapDataset "post"'  # 4000/s < 4444/s
    sequential = dataclasses.replace(report, ops=report.ops[:1] + (OpRate("MapDataset", "decode", 1000.0),)
                                     + report.ops[2:])
    assert sequential.label(sequential.limiting) == 'MapDataset "decode"'  # 1111/s alone
    data = report.to_dict()
    assert data["limiting"] == 'MapDataset "post"' and [op["limits"] for op in data["ops"]] == [False, False, True]
    assert data["rewrites"] == ["inject_prefetch"]
    assert set(data["ops"][0]) == {"op", "name", "examples_per_s", "added_ms_per_example", "parallel",
                                   "parallelism", "capacity_examples_per_s", "limits"}
    (line,) = [line for line in report.table_lines() if "limits the pipeline" in line]
    assert line.split()[:2] == ["MapDataset", "post"]


def test_default_rewrites_follow_the_options():
    import tensorflow as tf

    ds = tf.data.Dataset.range(3)
    assert default_rewrites(ds) == REWRITES  # TensorFlow's defaults: all on
    options = tf.data.Options()
    options.experimental_optimization.map_parallelization = False
    assert default_rewrites(ds.with_options(options)) == ("map_and_batch_fusion", "inject_prefetch")
    off = tf.data.Options()
    off.experimental_optimization.apply_default_optimizations = False
    assert default_rewrites(ds.with_options(off)) == ()


def test_ops_names_a_deliberately_slow_map_as_the_limit(user_file):
    # A 2 ms sleep per example in the dataset_fn's "slow" map; beside it, a plain input_fn of
    # variable-length examples (padded per batch) with no options of its own.
    result = bench.run(dataset_fn=f"{user_file}:slow_fn", input_fns=[f"{user_file}:varlen_input_fn"],
                       variants=["naive", "optimized"], ops=True, batches=1, repeats=1, warmup=1,
                       overrides={"batch_size": 4}, stage_seconds=0.1, progress=False)
    assert [r.variant for r in result.ops] == ["naive", "optimized", f"{user_file}:varlen_input_fn"]
    for report, op in zip(result.ops, ("MapDataset", "ParallelMapDatasetV2")):
        assert [(o.op, o.name) for o in report.ops] == [
            ("RangeDataset", ""), ("RepeatDataset", ""), (op, "slow"), ("MapDataset", "fast"), ("BatchDatasetV2", "")]
        assert report.label(report.limiting) == f'{op} "slow"'
    assert result.ops[1].ops[2].parallel and result.ops[1].ops[2].parallelism == result.machine["usable_cores"]
    limit_lines = [line for line in result.table().splitlines() if "<- limits the pipeline" in line]
    assert len(limit_lines) == 3 and all("slow" in line for line in limit_lines[:2])
    # naive's options turn tf.data's rewrites off (it is really sequential); a plain input_fn keeps TF's defaults.
    assert [r.rewrites for r in result.ops] == [(), REWRITES, REWRITES]
    # The input_fn's first two batches: lengths 1-4 padded to 4, then 5, 1, 2, 3 padded to 5.
    varlen = result[f"{user_file}:varlen_input_fn"]
    assert varlen.padding_share == pytest.approx(15 / 36) and result["naive"].padding_share is None
    assert "int64[4, 4]" in varlen.batch_spec


def test_the_timing_loops_own_cost_is_taken_out_of_every_prefix():
    # The loop costs 0.02 ms an element. Range alone times at 0.021 ms an example: 0.001 of it is Range's.
    # Batching by 16 takes the loop down to 0.02 / 16 an example: the batch's own 0.004 ms shows, not a gain.
    report = OpsReport("v", (OpRate("RangeDataset", "", 1000 / 0.021), OpRate("MapDataset", "", 1000 / 0.031),
                             OpRate("BatchDatasetV2", "", 1000 / (0.011 + 0.004 + 0.02 / 16), elements=1 / 16)),
                       cores=2, loop_ms=0.02)
    assert report.added_ms == pytest.approx((0.001, 0.010, 0.004))
    assert report.label(report.limiting) == "MapDataset" and report.to_dict()["loop_ms_per_element"] == 0.02


def test_the_train_orders_windows_count_as_their_examples(tiny_shards):
    # The order hands on windows of records (a range of epochs, flat-mapped): counting each window as
    # one element made its prefix look thousands of times slower than the chain it feeds.
    import tfpipe
    from tfpipe.bench.ops import measure_ops

    pipe = tfpipe.PipelineConfig.optimized(batch_size=4, seed=0)
    report = measure_ops(tfpipe.build_dataset(tiny_shards, "train", pipe), 0.3, cores=1)
    rates = {op.op: op.rate for op in report.ops}
    assert rates["FlatMapDataset"] > rates["PrefetchDataset"] / 2
