"""tfpipe bench: statistics, variant specs, ablation, report formats, and real runs in worker processes.

No speed is asserted anywhere: the machine running the tests is shared.
"""

import dataclasses
import json
import multiprocessing
import os
import statistics
import subprocess
import sys

import pytest

from tests.support import make_corpus
from tfpipe import bench
from tfpipe.bench.report import (STAGE_NAMES, BenchResult, RoundStats, StageReport, Turn, VariantResult,
                                 added_ms, round_stats)
from tfpipe.config import TOGGLES, PipelineConfig
from tfpipe.domains.audio.config import AudioConfig
from tfpipe.errors import DataError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FEAT = AudioConfig(clip_seconds=0.25)

# The JSON keys users and scripts read; changing them is a schema change (bump SCHEMA_VERSION).
TOP_KEYS = {"format", "version", "settings", "machine", "variants", "stages", "ops", "wall_s", "phases_s"}
VARIANT_KEYS = {"name", "kind", "reference", "note", "config", "examples_per_s", "ratio", "baseline_ratio",
                "cores", "pinned", "examples_per_s_per_core", "speedup", "first_batch_s", "import_rss_mb",
                "peak_rss_mb", "ms_per_batch", "input_wait_share", "ideal", "share_of_ideal", "turns", "batch_spec"}
STAGE_KEYS = {"label", "features", "batch_size", "cores", "limiting", "fused_rate", "vectorized_rate", "ideal",
              "stages"}
MACHINE_KEYS = {"cores", "usable_cores", "tf_version", "python", "platform", "gpu"}
SETTINGS_KEYS = {"data", "shards", "domain", "num_examples", "num_classes", "variants", "baseline", "ablation",
                 "dataset_fn", "input_fns", "cores", "ops", "batches", "turn_batches", "turn_seconds", "repeats",
                 "warmup", "settle_batches", "step_ms", "batch_size", "stage_seconds", "features", "overrides",
                 "frozen_while_idle"}


# --- statistics (pure) ---------------------------------------------------------------------------

def _turns(seconds, examples=100, batches=4):
    return [Turn(batches, examples, s, s / 4) for s in seconds]


def test_round_stats_takes_ratios_within_rounds_then_the_median():
    turns = {"a": _turns([1.0, 2.0, 0.5]),  # 100, 50, 200 examples/s
             "b": _turns([0.5, 1.0, 0.5])}  # 200, 100, 200 examples/s
    stats = round_stats(turns, {"a": "a", "b": "a"})
    assert stats["a"] == RoundStats((100.0, 50.0, 200.0), 100.0, 50.0, 200.0, 1.0)
    assert stats["b"].rates == (200.0, 100.0, 200.0)
    assert (stats["b"].median, stats["b"].min, stats["b"].max) == (200.0, 100.0, 200.0)
    assert stats["b"].ratio == 2.0  # per-round ratios 2, 2, 1; not median(b) / median(a) = 2 by chance only


def test_round_stats_ratio_cancels_a_slow_round():
    # Rounds 2 and 4 are 10x slower for everyone (drift); per round the ratio is exactly 2 regardless.
    turns = {"a": _turns([1.0, 10.0, 1.0, 10.0]), "b": _turns([0.5, 5.0, 0.5, 5.0])}
    stats = round_stats(turns, {"a": "a", "b": "a"})
    assert stats["b"].ratio == pytest.approx(2.0)
    assert stats["b"].median / stats["a"].median == pytest.approx(2.0)
    uneven = {"a": _turns([1.0, 10.0, 10.0]), "b": _turns([0.5, 5.0, 1.0])}
    assert round_stats(uneven, {"a": "a", "b": "a"})["b"].ratio == pytest.approx(2.0)  # ratios 2, 2, 10


def test_round_stats_rejects_uneven_rounds():
    with pytest.raises(ValueError, match="rounds"):
        round_stats({"a": _turns([1.0, 1.0]), "b": _turns([1.0])}, {"a": "a", "b": "a"})


def test_stage_costs_name_the_limiting_stage_and_the_ideal():
    rates = (1000.0, 500.0, 250.0, 100.0, 100.0)  # 1, 2, 4, 10, 10 ms per example cumulated
    assert added_ms(rates) == pytest.approx((1.0, 1.0, 2.0, 6.0, 0.0))
    report = StageReport("tf", rates, fused_rate=90.0, vectorized_rate=120.0, cores=2)
    assert report.limiting == "features"
    assert report.ideal == 240.0  # the faster single-thread map times the cores
    assert added_ms((100.0, 200.0)) == pytest.approx((10.0, 0.0))  # a faster prefix (noise) adds nothing


def test_ops_report_credits_parallel_ops_with_their_cores():
    from tfpipe.bench.ops import OpRate, OpsReport

    # 0.1, 0.9 and 0.25 ms/example added; the parallel map costs most but has 4 threads.
    report = OpsReport("v", (OpRate("RangeDataset", "", 10_000.0), OpRate("ParallelMapDatasetV2", "decode", 1000.0,
                                                                         True, 4),
                             OpRate("MapDataset", "post", 800.0)), cores=4)
    assert report.added_ms == pytest.approx((0.1, 0.9, 0.25))
    assert report.capacities == pytest.approx((10_000.0, 4000 / 0.9, 4000.0))
    assert report.limiting == 2 and report.label(2) == 'MapDataset "post"'  # 4000/s < 4444/s
    sequential = dataclasses.replace(report, ops=report.ops[:1] + (OpRate("MapDataset", "decode", 1000.0),)
                                     + report.ops[2:])
    assert sequential.label(sequential.limiting) == 'MapDataset "decode"'  # 1111/s alone
    data = report.to_dict()
    assert data["limiting"] == 'MapDataset "post"' and [op["limits"] for op in data["ops"]] == [False, False, True]
    assert set(data["ops"][0]) == {"op", "name", "examples_per_s", "added_ms_per_example", "parallel",
                                   "parallelism", "capacity_examples_per_s", "limits"}
    (line,) = [line for line in report.table_lines() if "limits the pipeline" in line]
    assert line.split()[:2] == ["MapDataset", "post"]


# --- variant specs ---------------------------------------------------------------------------------

def test_presets_and_typed_overrides():
    v = bench.parse_variant("optimized")
    assert (v.kind, v.pipeline, v.features, v.changed) == ("pipeline", PipelineConfig.optimized(),
                                                           AudioConfig(), ())
    v = bench.parse_variant("naive:backend=librosa, batch_size=32,fmax=none", FEAT)
    assert v.pipeline == PipelineConfig.naive(batch_size=32)
    assert v.features == dataclasses.replace(FEAT, backend="librosa", fmax=None)
    assert v.changed == ("backend", "batch_size", "fmax")
    v = bench.parse_variant("optimized:fuse_maps=false,prefetch=0,n_mels=40,clip_seconds=0.5,seed=3")
    assert (v.pipeline.fuse_maps, v.pipeline.prefetch, v.pipeline.seed) == (False, False, 3)
    assert (v.features.n_mels, v.features.clip_seconds) == (40, 0.5)
    assert bench.parse_variant("naive:prefetch,nodeterministic").pipeline == PipelineConfig.naive(
        prefetch=True, deterministic=False)  # absl-style bare flags


def test_common_overrides_apply_first_and_the_spec_wins():
    common = {"batch_size": 16, "n_mels": 32, "prefetch": True}
    v = bench.parse_variant("naive:batch_size=8", overrides=common)
    assert (v.pipeline.batch_size, v.pipeline.prefetch, v.features.n_mels) == (8, True, 32)
    assert v.changed == ("batch_size",)


def test_keras_and_shards_specs():
    k = bench.parse_variant("keras:batch_size=16,n_mels=40")
    assert (k.kind, k.pipeline.batch_size, k.features.n_mels) == ("keras", 16, 40)
    assert set(k.config()["pipeline"]) == {"recipe", "batch_size", "seed"}
    s = bench.parse_variant("shards")
    assert (s.kind, s.pipeline) == ("shards", PipelineConfig.optimized())
    s = bench.parse_variant("shards:naive,prefetch=true")
    assert (s.kind, s.pipeline) == ("shards", PipelineConfig.naive(prefetch=True))


@pytest.mark.parametrize("spec, message", [
    ("fast", r"unknown name 'fast'; allowed: optimized, naive, keras, shards"),
    ("optimized:fuse=false", r"unknown field 'fuse'; allowed fields: repeat_before_shuffle, .*n_mels"),
    ("optimized:fuse_maps=maybe", r"fuse_maps='maybe': expected true or false"),
    ("naive:batch_size=big", r"batch_size='big': expected an integer"),
    ("naive:clip_seconds=long", r"clip_seconds='long': expected a number"),
    ("naive:backend=torch", r"backend='torch': allowed values are tf, librosa"),
    ("optimized:batch_size=0", r"'optimized:batch_size=0': PipelineConfig.batch_size=0: must be >= 1"),
    ("keras:prefetch=false", r"keras takes only batch_size, seed and AudioConfig fields, not prefetch"),
    ("optimized:n_mels", r"'n_mels' is not field=value"),
    ("optimized:nofuse", r"'nofuse' is not field=value"),
])
def test_bad_specs_say_what_is_allowed(spec, message):
    with pytest.raises(ValueError, match=message):
        bench.parse_variant(spec)


def test_split_variants_keeps_overrides_with_their_variant():
    text = "naive,optimized:fuse_maps=false,n_mels=40,keras,shards:naive,noprefetch"
    assert bench.split_variants(text) == [
        "naive", "optimized:fuse_maps=false,n_mels=40", "keras", "shards:naive,noprefetch"]
    assert bench.split_variants("naive, noprefetch,batch_size=8") == ["naive:noprefetch,batch_size=8"]


def test_resolve_variants_baseline_and_duplicates():
    chosen = bench.resolve_variants(["naive", "optimized", "naive"])
    assert [(v.name, v.reference) for v in chosen] == [("naive", "naive"), ("optimized", "naive")]
    chosen = bench.resolve_variants(["naive", "optimized"], baseline="optimized")
    assert [v.reference for v in chosen] == ["optimized", "optimized"]
    with pytest.raises(ValueError, match="baseline 'keras' is not one of the variants: naive, optimized"):
        bench.resolve_variants(["naive", "optimized"], baseline="keras")


def test_ablation_flips_every_toggle_alone_and_the_backend():
    variants = bench.ablation_variants(FEAT)
    by_name = {v.name: v for v in variants}
    assert len(by_name) == len(variants) == 2 * (len(TOGGLES) + 2)
    for preset in ("optimized", "naive"):
        base = by_name[preset]
        flipped = [v for v in variants if v.reference == preset]
        assert sorted(f for v in flipped for f in v.changed) == sorted((*TOGGLES, "backend"))
        for v in flipped:
            (field,) = v.changed
            side = "features" if field == "backend" else "pipeline"
            config, base_config = getattr(v, side), getattr(base, side)
            assert getattr(config, field) != getattr(base_config, field)
            unflipped = dataclasses.replace(config, **{field: getattr(base_config, field)})
            assert unflipped == base_config  # nothing else changed
    assert by_name["optimized:fuse_maps=false"].pipeline.fuse_maps is False
    assert by_name["naive:parallel_map=true"].pipeline.parallel_map is True
    assert by_name["naive:prefetch_to_device=true"].pipeline.prefetch_to_device is True
    assert by_name["optimized:prefetch_to_device=false"].pipeline.prefetch_to_device is False
    assert by_name["optimized:backend=librosa"].features.backend == "librosa"
    # Toggles that cannot matter here say so, instead of reading as "no gain".
    assert "no GPU" in bench._note(by_name["optimized:prefetch_to_device=false"], "wav", gpu=False)
    assert bench._note(by_name["optimized:prefetch_to_device=false"], "wav", gpu=True) == ""
    assert "wav source" in bench._note(by_name["naive:parallel_reads=true"], "wav", gpu=False)
    assert bench._note(by_name["optimized:fuse_maps=false"], "wav", gpu=False) == ""


# --- report formats (pure) -------------------------------------------------------------------------

def _result(step_ms=0.0):
    turns = {"naive": _turns([1.0, 2.0]), "optimized": _turns([0.5, 0.5])}
    refs = {"naive": "naive", "optimized": "naive"}
    stats = round_stats(turns, refs)
    stage = StageReport("tf", (1000.0, 500.0, 250.0, 100.0, 100.0), 90.0, 120.0, 2)
    variants = tuple(VariantResult(name, "pipeline", refs[name], bench.parse_variant(name).config(), "",
                                   tuple(turns[name]), stats[name], 1.5, 400.0, 600.0, stage.ideal, cores=2)
                     for name in ("naive", "optimized"))
    settings = {"data": "/data", "shards": None, "domain": "audio", "num_examples": 400, "num_classes": 4,
                "variants": ["naive", "optimized"], "baseline": "naive", "ablation": False, "dataset_fn": None,
                "input_fns": [], "cores": None, "ops": False, "batches": 4,
                "turn_batches": {"naive": 4, "optimized": 4}, "turn_seconds": 0.0, "repeats": 2, "warmup": 1,
                "settle_batches": 1, "step_ms": step_ms, "batch_size": 25, "stage_seconds": 0.5, "features": {},
                "overrides": {}, "frozen_while_idle": True}
    machine = {"cores": 2, "usable_cores": 2, "tf_version": "2.15.1", "python": "3.11", "platform": "linux",
               "gpu": False}
    return BenchResult(settings, machine, variants, (stage,), 12.0, {"start": 1.0})


def test_json_schema_is_stable():
    data = json.loads(_result().to_json())
    assert set(data) == TOP_KEYS
    assert (data["format"], data["version"]) == ("tfpipe-bench", 3)
    assert set(data["settings"]) == SETTINGS_KEYS
    assert set(data["machine"]) == MACHINE_KEYS
    assert set(data["variants"][0]) == VARIANT_KEYS
    assert set(data["variants"][0]["examples_per_s"]) == {"median", "min", "max", "rounds"}
    assert set(data["variants"][0]["config"]) == {"pipeline", "features"}
    assert set(data["stages"][0]) == STAGE_KEYS
    assert [s["name"] for s in data["stages"][0]["stages"]] == list(STAGE_NAMES)
    optimized = data["variants"][1]
    assert optimized["ratio"] == 3.0  # rounds: 200/100 and 200/50 -> median of 2 and 4
    assert optimized["share_of_ideal"] == pytest.approx(200 / 240)
    assert (optimized["cores"], optimized["examples_per_s_per_core"], optimized["speedup"]) == (2, 100.0, None)


def test_table_shows_every_variant_ratio_and_the_limiting_stage():
    text = _result().table()
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("variant"))
    assert all(col in header for col in ("examples/s", "per core", "min-max", "vs reference", "first batch",
                                         "peak RSS", "% ideal"))
    optimized = next(line for line in lines if line.startswith("optimized"))
    assert "3.00x naive" in optimized and "200" in optimized and "83%" in optimized
    assert optimized.split()[1:3] == ["200", "100"]  # median, then per core (2 cores)
    assert "features" in next(line for line in lines if "limits the pipeline" in line)
    assert "ideal" in text and "240 examples/s" in text
    step_text = _result(step_ms=50).table()
    assert "input wait" in step_text and "max(input, step)" in step_text


def test_plot_writes_a_png(tmp_path):
    path = str(tmp_path / "bench.png")
    _result().plot(path)
    with open(path, "rb") as f:
        assert f.read(8) == PNG_MAGIC
    import matplotlib.image

    height, width, _ = matplotlib.image.imread(path).shape
    assert width > 400 and height > 300


# --- real runs in worker processes ----------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("bench") / "corpus", per_class=6)  # 18 clips of 0.25 s


@pytest.fixture(scope="module")
def tiny_shards(tiny, tmp_path_factory):
    import tfpipe

    shard_dir = str(tmp_path_factory.mktemp("bench") / "shards")
    tfpipe.write_shards(tiny, shard_dir, num_shards=2, num_workers=0, features=FEAT, progress=False)
    return shard_dir


def test_variants_own_features_decide_which_wavs_are_usable_and_ideal_is_like_for_like(tmp_path):
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
    assert stage.limiting in STAGE_NAMES and stage.cores >= 1 and stage.batch_size == 4
    assert all(r > 0 for r in stage.rates) and naive.ideal == stage.ideal
    assert result.settings["num_examples"] == 18 and result.machine["tf_version"].startswith("2.15")
    data = json.loads(result.to_json())
    assert set(data) == TOP_KEYS and set(data["variants"][0]) == VARIANT_KEYS
    result.plot(str(tmp_path / "run.png"))
    assert (tmp_path / "run.png").read_bytes()[:8] == PNG_MAGIC
    assert "optimized:fuse_maps=false" in result.table()


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


def test_audio_keras_recipe_makes_the_chains_features(tiny):
    import numpy as np
    import tensorflow as tf

    import tfpipe
    from tfpipe.bench import domains
    from tfpipe.domains.audio.keras import keras_recipe

    assert domains.keras_recipe(domains.of_config(FEAT)) is keras_recipe  # found by the config's domain
    ours = list(tfpipe.build_dataset(tiny, "eval", PipelineConfig.optimized(batch_size=4), FEAT))
    theirs = list(keras_recipe(tiny, FEAT, batch_size=4, mode="eval"))  # unshuffled: the same file order
    assert [b[1].dtype for b in theirs] == [tf.int64] * 5 and sum(len(b[1]) for b in theirs) == 18
    for key in ("log_mel",):
        np.testing.assert_allclose(np.concatenate([b[0][key] for b in theirs]),
                                   np.concatenate([b[0][key] for b in ours]), atol=1e-4)
    np.testing.assert_array_equal(np.concatenate([b[1] for b in theirs]), np.concatenate([b[1] for b in ours]))
    train = keras_recipe(tiny, FEAT, batch_size=4, seed=1)
    assert int(train.cardinality()) == int(tf.data.INFINITE_CARDINALITY)
    assert int(keras_recipe(tiny, FEAT, batch_size=4, seed=1, epochs=2).cardinality()) == 10
    with pytest.raises(ValueError, match="not a folder"):
        keras_recipe(os.path.join(tiny, "missing"), FEAT)


def test_stage_measurement_follows_the_sources_own_stages(tiny, tiny_shards):
    from tfpipe.bench import worker

    (wav,) = worker._stages({}, {"data": tiny}, [("audio features", FEAT, 4)], budget_s=0.03)
    assert wav["names"] == STAGE_NAMES and len(wav["rates"]) == 5 and wav["vectorized_rate"] > 0
    # A v2 shard folder: its files expand into parsed blocks of records, then the float16 -> float32
    # cast (batchable) runs on whole batches.
    (shards,) = worker._stages({}, {"data": tiny_shards}, [("shards", FEAT, 4)], budget_s=0.03)
    assert shards["names"] == ("list", "records", "cast", "batch") and len(shards["rates"]) == 4
    report = bench.StageReport(cores=2, **shards)
    assert report.limiting in report.names and report.ideal > 0


def test_run_rejects_missing_inputs_before_starting_workers(tiny):
    with pytest.raises(ValueError, match="pass --shards DIR"):
        bench.run(tiny, ["naive", "shards"], progress=False)
    with pytest.raises(ValueError, match="repeats=0: must be >= 1"):
        bench.run(tiny, ["naive"], repeats=0, progress=False)


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


def test_shards_variants_read_the_shard_folder(tiny, tiny_shards):
    result = bench.run(tiny, ["shards", "shards:naive"], shards=tiny_shards, batches=1, repeats=1, warmup=0,
                       features=FEAT, overrides={"batch_size": 4}, stages=False, progress=False)
    assert [(v.kind, v.config["pipeline"]["fuse_maps"]) for v in result.variants] == [("shards", True),
                                                                                       ("shards", False)]
    assert all(v.turns[0].examples == 4 and v.ideal is None for v in result.variants)
    with pytest.raises(ValueError, match="not a shard folder"):
        bench.run(tiny, ["shards"], shards=tiny, progress=False)


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


def test_cli_help_explains_itself():
    tfpipe_script = os.path.join(os.path.dirname(sys.executable), "tfpipe")  # the installed console script
    out = subprocess.run([tfpipe_script, "bench", "--help"], capture_output=True, text=True,
                         check=True).stdout
    for text in ("--variants", "optimized:fuse_maps=false", "naive:backend=librosa", "keras",
                 "--[no]ablation", "--step_ms", "--batches", "--turn_seconds", "--repeats", "--warmup", "--json",
                 "--plot", "--shards", "--[no]prepare", "--workers", "--batch_size", "--n_mels", "--dataset_fn",
                 "--input_fn", "--[no]ops", "--cores"):
        assert text in out, text


# --- any pipeline: a user's dataset_fn, plain input_fns, per-op rates, core counts ----------------

# The seed question's functions (read bytes, decode_wav, post-process), written to a .py file the
# way a user keeps them; dataset_fn builds the seed's chain from the PipelineConfig it is handed.
USER_PIPELINE = '''
import glob
import os
import time

import tensorflow as tf

DATA = {data!r}


def _read_wav(filename, label):
    wav, _ = tf.audio.decode_wav(tf.io.read_file(filename), desired_channels=1)
    return tf.squeeze(wav, -1), label


def _post_process(wav, label):
    return tf.math.log(tf.abs(tf.signal.stft(wav, frame_length=400, frame_step=160)) + 1e-6), label


def _files():
    files = sorted(glob.glob(os.path.join(DATA, "*", "*.wav")))
    classes = sorted({{os.path.basename(os.path.dirname(f)) for f in files}})
    return files, [classes.index(os.path.basename(os.path.dirname(f))) for f in files]


def dataset_fn(pipeline, mode):
    files, labels = _files()
    ds = tf.data.Dataset.from_tensor_slices((files, labels))
    calls = tf.data.AUTOTUNE if pipeline.parallel_map else None
    if pipeline.repeat_before_shuffle:
        ds = ds.repeat()
    if pipeline.fuse_maps:
        ds = ds.shuffle(len(files)).map(lambda f, l: _post_process(*_read_wav(f, l)), num_parallel_calls=calls,
                                        name="read_and_post")
    else:
        ds = ds.map(_read_wav, num_parallel_calls=calls, name="read").shuffle(len(files))
        ds = ds.map(_post_process, num_parallel_calls=calls, name="post")
    ds = ds.map(lambda spec, label: ({{"spec": spec}}, label)).batch(pipeline.batch_size, drop_remainder=True)
    if not pipeline.repeat_before_shuffle:
        ds = ds.repeat()
    return ds.prefetch(tf.data.AUTOTUNE) if pipeline.prefetch else ds


def _sleep(x):
    time.sleep(0.002)
    return x


def slow_fn(pipeline, mode):
    calls = tf.data.AUTOTUNE if pipeline.parallel_map else None
    ds = tf.data.Dataset.range(10_000).repeat()
    ds = ds.map(lambda x: tf.py_function(_sleep, [x], tf.int64), num_parallel_calls=calls, name="slow")
    return ds.map(lambda x: (tf.fill([16], x), x % 3), name="fast").batch(pipeline.batch_size)


def input_fn_a(params):  # Estimator style: the batch size comes in params
    files, labels = _files()
    ds = tf.data.Dataset.from_tensor_slices((files, labels)).repeat()
    return ds.map(_read_wav).map(_post_process).batch(params["batch_size"], drop_remainder=True)


def input_fn_b():  # no arguments, its own batch size, one epoch only
    files, labels = _files()
    return tf.data.Dataset.from_tensor_slices((files, labels)).map(_read_wav).batch(3, drop_remainder=True)


def input_fn_tensors(mode, params, config):  # the seed's graph-mode habit: tensors, not a Dataset
    return {{"wav": tf.zeros([2])}}, tf.zeros([2])
'''


@pytest.fixture(scope="module")
def user_file(tiny, tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "my_pipeline.py"
    path.write_text(USER_PIPELINE.format(data=tiny))
    return str(path)


def _tfpipe(*args, timeout=240):
    tfpipe_script = os.path.join(os.path.dirname(sys.executable), "tfpipe")
    done = subprocess.run([tfpipe_script, "bench", "--noprogress", *args], capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_cli_times_a_dataset_fn_from_a_file_with_each_variants_toggles(user_file, tmp_path):
    out = _tfpipe("--dataset_fn", f"{user_file}:dataset_fn", "--variants", "naive,optimized", "--batch_size", "4",
                  "--batches", "2", "--repeats", "2", "--warmup", "1", "--ops", "--stage_seconds", "0.05",
                  "--json", str(tmp_path / "b.json"))
    assert f"dataset_fn {user_file}:dataset_fn" in out.splitlines()[0]
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith(("naive ", "optimized "))}
    assert set(rows) == {"naive", "optimized"} and "x naive" in rows["optimized"]
    data = json.loads((tmp_path / "b.json").read_text())
    assert data["settings"]["data"] is None and data["settings"]["dataset_fn"] == f"{user_file}:dataset_fn"
    naive, optimized = data["variants"]
    for v in (naive, optimized):
        assert v["kind"] == "dataset_fn" and v["examples_per_s"]["median"] > 0
        assert [t["examples"] for t in v["turns"]] == [8, 8] and v["config"]["pipeline"]["batch_size"] == 4
    assert (naive["config"]["pipeline"]["fuse_maps"], optimized["config"]["pipeline"]["fuse_maps"]) == (False, True)
    # The toggles reached the user's chain: its ops are the ones each PipelineConfig asks for.
    ops = {o["variant"]: [(op["op"], op["name"]) for op in o["ops"]] for o in data["ops"]}
    assert ("MapDataset", "read") in ops["naive"] and ("MapDataset", "post") in ops["naive"]
    assert ops["naive"][-1] == ("RepeatDataset", "")  # the seed's order: batch, then repeat
    assert ("ParallelMapDatasetV2", "read_and_post") in ops["optimized"]
    assert ops["optimized"][1] == ("RepeatDataset", "") and ops["optimized"][-1] == ("PrefetchDataset", "")
    assert all(op["examples_per_s"] > 0 for o in data["ops"] for op in o["ops"])
    assert 'ParallelMapDatasetV2  read_and_post' in out


def test_ops_names_a_deliberately_slow_map_as_the_limit(user_file):
    result = bench.run(dataset_fn=f"{user_file}:slow_fn", variants=["naive", "optimized"], ops=True, batches=1,
                       repeats=1, warmup=0, overrides={"batch_size": 4}, stage_seconds=0.1, progress=False)
    assert [r.variant for r in result.ops] == ["naive", "optimized"]
    for report, op in zip(result.ops, ("MapDataset", "ParallelMapDatasetV2")):
        assert [(o.op, o.name) for o in report.ops] == [
            ("RangeDataset", ""), ("RepeatDataset", ""), (op, "slow"), ("MapDataset", "fast"), ("BatchDatasetV2", "")]
        assert report.label(report.limiting) == f'{op} "slow"'
        assert report.added_ms[2] > 1.5  # the 2 ms sleep, give or take the shared machine
    assert result.ops[1].ops[2].parallel and result.ops[1].ops[2].parallelism == result.machine["usable_cores"]
    limit_lines = [line for line in result.table().splitlines() if "<- limits the pipeline" in line]
    assert len(limit_lines) == 2 and all("slow" in line for line in limit_lines)


def test_cli_ab_times_two_plain_input_fns(user_file, tmp_path):
    specs = [f"{user_file}:input_fn_a", f"{user_file}:input_fn_b"]
    out = _tfpipe("--input_fn", ",".join(specs), "--batch_size", "4", "--batches", "2", "--repeats", "2",
                  "--warmup", "0", "--json", str(tmp_path / "ab.json"))
    data = json.loads((tmp_path / "ab.json").read_text())
    a, b = data["variants"]
    assert [a["name"], b["name"]] == specs and {a["kind"], b["kind"]} == {"input_fn"}
    assert [t["examples"] for t in a["turns"]] == [8, 8]  # params={"batch_size": 4} reached input_fn_a
    assert [t["examples"] for t in b["turns"]] == [6, 6]  # input_fn_b batches by 3, whatever params say
    assert b["note"] == "finite dataset: repeated" and a["note"] == ""
    assert b["reference"] == specs[0] and b["ratio"] > 0 and a["examples_per_s"]["median"] > 0
    assert f"x {specs[0]}" in next(line for line in out.splitlines() if line.startswith(specs[1]))


def test_user_functions_by_spec_and_their_errors(user_file):
    from tfpipe.bench import user_fns

    assert bench.fn_spec(bench.parse_variant) == "tfpipe.bench.variants:parse_variant"
    assert bench.load_fn("tfpipe.bench.variants:parse_variant") is bench.parse_variant
    assert bench.load_fn(f"{user_file}:dataset_fn").__name__ == "dataset_fn"
    with pytest.raises(ValueError, match="not a lambda or nested function"):
        bench.fn_spec(lambda pipeline, mode: None)
    with pytest.raises(ValueError, match=r"no file .*missing\.py"):
        bench.load_fn("missing.py:fn")
    with pytest.raises(ValueError, match=r"my_pipeline\.py has no 'nothing'"):
        bench.load_fn(f"{user_file}:nothing")
    with pytest.raises(ValueError, match=r"returned a tuple of 2 \(dict, .*\), not a tf.data.Dataset; .*"
                                         r"instead of iterator.get_next\(\)"):
        user_fns.call_input_fn(f"{user_file}:input_fn_tensors", 4)
    with pytest.raises(ValueError, match=r"requires pipeline; an Estimator input_fn takes only mode, params"):
        user_fns.call_input_fn(f"{user_file}:dataset_fn", 4)
    with pytest.raises(ValueError, match=r"variant 'keras': with dataset_fn=.* the variants are the presets"):
        bench.parse_variant("keras", dataset_fn="x.py:f")
    with pytest.raises(ValueError, match=r"n_mels: AudioConfig field\(s\) do not reach dataset_fn"):
        bench.parse_variant("optimized:n_mels=40", dataset_fn="x.py:f")
    # A user chain's epoch, for default turns of whole epochs: 18 clips in batches of 4, remainder dropped.
    from tfpipe.bench import worker

    make = bench.load_fn(f"{user_file}:dataset_fn")
    for pipeline in (PipelineConfig.naive(batch_size=4), PipelineConfig.optimized(batch_size=4)):
        assert worker._epoch_batches(make(pipeline, "train"), 4) == 4
    chosen = bench.resolve_variants([], ablation=True, dataset_fn="x.py:f")
    assert {v.kind for v in chosen} == {"dataset_fn"} and len(chosen) == 2 * (len(TOGGLES) + 1)  # no backend flip
    with pytest.raises(ValueError, match=r"read data: pass data="):
        bench.run(variants=["naive"], progress=False)


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
        assert v.ideal == pytest.approx(stage.ideal / stage.cores * v.cores)  # the ideal for its own cores
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
