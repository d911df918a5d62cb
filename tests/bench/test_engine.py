"""bench/engine.py: real runs in worker processes; every check that can fail done before a worker starts.

No speed is asserted anywhere: the machine running the tests is shared.
"""

import json
import multiprocessing
import os
import statistics

import pytest

from tests.bench.conftest import FEAT
from tests.bench.support import PNG_MAGIC, TOP_KEYS, VARIANT_KEYS
from tests.support import make_corpus
from tfpipe import bench
from tfpipe.bench.stages import STAGE_NAMES
from tfpipe.errors import DataError


def test_run_times_two_variants_in_worker_processes(tiny, tmp_path):
    result = bench.run(tiny, ["naive", "optimized:fuse_maps=false"], batches=2, repeats=2, warmup=1,
                       features=FEAT, overrides={"batch_size": 4}, stage_seconds=0.05, progress=False)
    assert multiprocessing.active_children() == []  # every worker ended
    assert [v.name for v in result.variants] == ["naive", "optimized:fuse_maps=false"]
    naive, other = result.variants
    for v in result.variants:
        assert [(t.batches, t.examples) for t in v.turns] == [(2, 8), (2, 8)]
        assert all(t.seconds > 0 and 0 <= t.wait_s <= t.seconds for t in v.turns)
        assert v.first_batch_s > 0 and v.peak_rss_mb >= v.import_rss_mb > 0
        assert v.stats.rates == tuple(t.examples / t.seconds for t in v.turns)
        assert v.config["features"]["clip_seconds"] == 0.25 and v.config["pipeline"]["batch_size"] == 4
    assert (naive.reference, other.reference, naive.stats.ratio) == ("naive", "naive", 1.0)
    assert other.stats.ratio == pytest.approx(statistics.median(
        a.rate / b.rate for a, b in zip(other.turns, naive.turns)))
    assert (naive.baseline_ratio, other.baseline_ratio) == (1.0, other.stats.ratio)  # reference = baseline
    (stage,) = result.stages
    assert stage.label == "audio features" and stage.names == STAGE_NAMES  # the wav domain's own stages
    assert stage.cores >= 1 and stage.batch_size == 4 and all(r > 0 for r in stage.rates)
    assert naive.ideal == stage.ideal and naive.stage_label == "audio features"
    assert result.settings["num_examples"] == 18 and result.machine["tf_version"].startswith("2.15")
    assert result.settings["epoch_batches"] == {"naive": 4, "optimized:fuse_maps=false": 4}
    # 18 clips are 4 batches an epoch: the run says it is too small to trust, and how much data it needs.
    assert any(c.startswith("an epoch is only 4 batch(es) of 4") and "80 examples" in c for c in result.caveats)
    assert set(result.phases) == {"start", "build", "rounds", "stages", "ops", "stop"}
    data = json.loads(result.to_json())
    assert set(data) == TOP_KEYS and set(data["variants"][0]) == VARIANT_KEYS
    result.plot(str(tmp_path / "run.png"))
    assert (tmp_path / "run.png").read_bytes()[:8] == PNG_MAGIC
    assert "optimized:fuse_maps=false" in result.table()


def test_default_turns_repeat_whole_epochs_until_turn_seconds(tiny):
    # 18 clips in batches of 4, drop_remainder: an epoch is 4 batches. A fast variant's epoch takes
    # milliseconds; the turn keeps taking whole epochs until 0.3 s have passed.
    result = bench.run(tiny, ["optimized"], turn_seconds=0.3, repeats=2, warmup=0, features=FEAT,
                       overrides={"batch_size": 4}, stages=False, progress=False)
    assert result.settings["turn_batches"] == {"optimized": 4} and result.settings["turn_seconds"] == 0.3
    for turn in result.variants[0].turns:
        assert turn.seconds >= 0.3 and turn.batches % 4 == 0 and turn.batches > 4
        assert turn.examples == 4 * turn.batches
    assert "epochs (4 batches) for >= 0.3 s" in result.table()


def test_a_shard_folders_stored_settings_are_where_variants_start(tiny, tiny_shards):
    # The shards hold 0.25 s clips; no --clip_seconds (no features=) is needed to read them.
    result = bench.run(tiny_shards, ["optimized", "shards:naive"], shards=tiny_shards, batches=1, repeats=1,
                       warmup=0, overrides={"batch_size": 4}, stages=False, progress=False)
    assert [(v.kind, v.config["pipeline"]["fuse_maps"]) for v in result.variants] == [("pipeline", True),
                                                                                       ("shards", False)]
    assert all(v.config["features"]["clip_seconds"] == 0.25 and v.turns[0].examples == 4 for v in result.variants)
    assert result.settings["features"]["clip_seconds"] == 0.25 and result.settings["domain"] == "audio"
    with pytest.raises(ValueError, match="not a shard folder"):
        bench.run(tiny, ["shards"], shards=tiny, progress=False)


def test_variants_own_features_decide_which_wavs_are_usable_and_the_limit_is_like_for_like(tmp_path):
    corpus = make_corpus(tmp_path / "8k", classes=("a", "b"), per_class=3, sample_rate=8000)
    result = bench.run(corpus, ["optimized:sample_rate=8000", "optimized:sample_rate=8000,n_mels=32",
                                "naive:sample_rate=8000,batch_size=3"],
                       batches=1, repeats=1, warmup=0, features=FEAT, overrides={"batch_size": 2},
                       stage_seconds=0.05, progress=False)
    first, other, third = result.variants
    # One stage report per distinct feature config (naive's equals optimized's), each named by what differs.
    assert [(s.label, s.features["n_mels"], s.batch_size) for s in result.stages] == [("n_mels=64", 64, 2),
                                                                                       ("n_mels=32", 32, 2)]
    assert first.ideal == result.stages[0].ideal and first.ideal > 0  # stages ran on its features
    assert other.ideal == result.stages[1].ideal and other.ideal > 0  # its own mels, its own stages
    assert third.ideal is None and third.share_of_ideal is None  # same features, another batch size: not like
    assert "float32[2, 13, 32]" in other.batch_spec and "int64[3]" in third.batch_spec
    assert "stages (n_mels=32, one thread" in result.table()
    with pytest.raises(DataError, match=r"sample rate 8000 Hz, expected 16000 Hz"):
        bench.run(corpus, ["optimized"], batches=1, repeats=1, features=FEAT, progress=False)


def test_errors_name_the_variant_in_the_parent_and_in_workers(tiny, tiny_shards):
    # Checked up front, before any worker starts: this variant's sample rate.
    message = r"(?s)variant 'optimized:sample_rate=8000'.*sample rate 16000 Hz, expected 8000 Hz"
    with pytest.raises(DataError, match=message):
        bench.run(tiny, ["naive", "optimized:sample_rate=8000"], batches=1, repeats=1, warmup=0,
                  features=FEAT, overrides={"batch_size": 4}, stages=False, progress=False)
    # Found only when the worker builds it: shards written with 64 mels, variant asks for 32.
    with pytest.raises(DataError, match=r"(?s)variant 'shards:n_mels=32'.*n_mels=64 \(pipeline asks for 32\)"):
        bench.run(tiny, ["naive", "shards:n_mels=32"], shards=tiny_shards, batches=1, repeats=1, warmup=0,
                  features=FEAT, overrides={"batch_size": 4}, stages=False, progress=False)
    assert multiprocessing.active_children() == []


def test_run_refuses_what_cannot_work_before_starting_workers(tiny, tiny_shards):
    with pytest.raises(ValueError, match="pass --shards DIR"):
        bench.run(tiny, ["naive", "shards"], progress=False)
    with pytest.raises(ValueError, match=r"RunOptions.repeats=0: must be >= 1"):
        bench.run(tiny, ["naive"], repeats=0, progress=False)
    with pytest.raises(ValueError, match=r"run\(\) got rounds: not RunOptions fields"):
        bench.run(tiny, ["naive"], rounds=3, progress=False)
    with pytest.raises(ValueError, match=r"variant 'naive' reads data: pass data="):
        bench.run(variants=["naive"], progress=False)
    # Less data than one batch: named with its size and the batch size (was StopIteration from a worker).
    for data, variant in ((tiny, "naive"), (tiny_shards, "shards:naive")):
        where = tiny_shards if variant.startswith("shards") else tiny
        with pytest.raises(ValueError, match=rf"variant '{variant}': {where} holds 18 example\(s\), fewer than one "
                                             rf"batch \(batch_size=64\): nothing to time; lower --batch_size"):
            bench.run(data, [variant], shards=tiny_shards, progress=False)
    assert multiprocessing.active_children() == []


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 usable cores")
def test_cores_pin_every_variant_once_per_count_and_give_the_speedup(tiny, tmp_path):
    result = bench.run(tiny, ["naive", "optimized"], cores=[1, 2], batches=2, repeats=2, warmup=0, features=FEAT,
                       overrides={"batch_size": 4}, stage_seconds=0.05, progress=False)
    assert [(v.name, v.cores, v.pinned) for v in result.variants] == [
        ("naive", 1, True), ("naive", 2, True), ("optimized", 1, True), ("optimized", 2, True)]
    stage = result.stages[0]
    for v in result.variants:
        first = result[f"{v.name}@1"]
        assert v.speedup == pytest.approx(statistics.median(a.rate / b.rate for a, b in zip(v.turns, first.turns)))
        assert v.per_core == pytest.approx(v.stats.median / v.cores)
        assert v.ideal == pytest.approx(stage.ideal / stage.cores * v.cores)  # the limit for its own cores
    opt2 = result["optimized@2"]
    assert opt2.reference == "naive" and opt2.stats.ratio == pytest.approx(statistics.median(
        a.rate / b.rate for a, b in zip(opt2.turns, result["naive@2"].turns)))  # within one core count
    data = json.loads(result.to_json())
    assert data["settings"]["cores"] == [1, 2] and [v["speedup"] for v in data["variants"]][0] == 1.0
    assert all(v["examples_per_s_per_core"] > 0 for v in data["variants"])
    header = next(line for line in result.table().splitlines() if line.startswith("variant"))
    assert "cores" in header and "vs 1 core" in header and "per core" in header
    result.plot(str(tmp_path / "cores.png"))
    assert (tmp_path / "cores.png").read_bytes()[:8] == PNG_MAGIC
    with pytest.raises(ValueError, match=r"cores=3: this process may use 2 cores"):
        bench.run(tiny, ["naive"], cores=[1, 3], progress=False)


def test_each_variant_reports_its_per_element_ceiling_and_the_cores_it_can_use(tiny):
    result = bench.run(tiny, ["naive", "optimized"], batches=1, repeats=1, warmup=0, features=FEAT,
                       overrides={"batch_size": 4}, stages=False, stage_seconds=0.05, progress=False)
    for v in result.variants:
        assert v.ceiling is not None and v.ceiling.rate > 0 and v.ceiling.fixed_us > 0 and v.ceiling.limiting
        assert v.ceiling.usable_cores(v.stats.median, v.cores) > 0
    assert "per-element ceiling" in result.table() and result.ops == ()  # the op table only with --ops
    assert json.loads(result.to_json())["variants"][1]["ceiling"]["usable_cores"] > 0
    plain = bench.run(tiny, ["optimized"], batches=1, repeats=1, warmup=0, features=FEAT, overrides={"batch_size": 4},
                      stages=False, ceiling=False, progress=False)
    assert plain.variants[0].ceiling is None and plain.phases["ops"] < 0.5
