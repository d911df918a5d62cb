"""Shared by the bench tests: hand-made results (pure: no TensorFlow, no processes) and the JSON keys."""

from tfpipe.bench.report import BenchResult, StageReport, Turn, VariantResult, round_stats
from tfpipe.bench.specs import BASES, parse_variant

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# The JSON keys users and scripts read; changing them is a schema change (bump SCHEMA_VERSION).
TOP_KEYS = {"format", "version", "settings", "machine", "variants", "stages", "ops", "winner", "skipped", "caveats",
            "wall_s", "phases_s"}
VARIANT_KEYS = {"name", "kind", "reference", "note", "config", "examples_per_s", "ratio", "baseline_ratio",
                "cores", "pinned", "examples_per_s_per_core", "speedup", "first_batch_s", "import_rss_mb",
                "peak_rss_mb", "ms_per_batch", "input_wait_share", "ideal", "share_of_ideal", "turns", "batch_spec",
                "padding_share", "stage_label", "within_noise", "ceiling"}
STAGE_KEYS = {"label", "features", "batch_size", "cores", "limiting", "limiting_rate", "ideal", "linear",
              "fused_rate", "vectorized_rate", "batched", "on_batches_ms_per_example", "stages", "advice"}
MACHINE_KEYS = {"cores", "usable_cores", "tf_version", "python", "platform", "gpu", "gpu_names"}
SETTINGS_KEYS = {"data", "shards", "domain", "num_examples", "num_classes", "variants", "baseline", "ablation",
                 "dataset_fn", "input_fns", "cores", "ops", "ceiling", "batches", "turn_batches", "epoch_batches",
                 "turn_seconds", "repeats", "warmup", "settle_batches", "step_ms", "batch_size", "stage_seconds",
                 "features", "overrides", "frozen_while_idle"}
MACHINE = {"cores": 2, "usable_cores": 2, "tf_version": "2.15.1", "python": "3.11", "platform": "linux", "gpu": False,
           "gpu_names": []}


def turns(seconds, examples=100, batches=4):
    """One Turn per round: `examples` in `seconds` each (a quarter of it waiting on input)."""
    return [Turn(batches, examples, s, s / 4) for s in seconds]


def settings(**changes):
    """A run's settings as the engine records them: 1000 clips, batch 25 (40 batches an epoch), 2 rounds."""
    base = {"data": "/data", "shards": None, "domain": "audio", "num_examples": 1000, "num_classes": 4,
            "variants": ["naive", "optimized"], "baseline": "naive", "ablation": False, "dataset_fn": None,
            "input_fns": [], "cores": None, "ops": False, "ceiling": False, "batches": 4,
            "turn_batches": {"naive": 4, "optimized": 4}, "epoch_batches": {"naive": 40, "optimized": 40},
            "turn_seconds": 0.0, "repeats": 2, "warmup": 1, "settle_batches": 1, "step_ms": 0.0,
            "batch_size": 25, "stage_seconds": 0.5, "features": {}, "overrides": {}, "frozen_while_idle": True}
    return {**base, **changes}


def result(seconds, refs, notes=None, stage=None, **setting_changes):
    """A BenchResult of variants named by `seconds` (their turns' seconds, round by round)."""
    stats = round_stats({n: turns(s) for n, s in seconds.items()}, refs)
    stage = stage or StageReport("audio features", (1000.0, 500.0, 250.0, 100.0, 100.0), 90.0, 120.0, 2)
    variants = tuple(VariantResult(name, "pipeline", refs[name], _config(name),
                                   (notes or {}).get(name, ""), tuple(turns(s)), stats[name], 1.5, 400.0, 600.0,
                                   stage.ideal, cores=2, stage_label=stage.label)
                     for name, s in seconds.items())
    return BenchResult(settings(variants=list(seconds), **setting_changes), MACHINE, variants, (stage,), 12.0,
                       {"start": 1.0})


def _config(name):
    """The config of a preset or recipe spec; a user's function's otherwise."""
    spec = name.partition("@")[0]
    return parse_variant(spec).config() if spec.partition(":")[0] in BASES else {"pipeline": None, "features": None}
