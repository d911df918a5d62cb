"""A/B timing of input-pipeline variants: the engine behind `tfpipe bench`.

How a run is kept fair:
  * Each variant lives in a process of its own (forked from a fork server that has
    imported TensorFlow, so no process inherits another's threads), built once; build
    + first batch is timed on its own, then `warmup` batches are taken untimed.
  * Rounds: the parent tells worker 1 to time its batches, waits, then worker 2, ...,
    then round 2 starts (A B C, A B C, ...), so drift hits every variant alike. Ratios
    to the reference are taken within each round, then the median over rounds.
  * Only the timed worker runs: every other worker is frozen with SIGSTOP. An idle
    tf.data pipeline is not idle: its parallel-map, prefetch and autotune threads keep
    working until their buffers are full, on the very cores being measured, and would
    then hand their own next turn batches made in someone else's time. A frozen worker
    resumes with the buffers it had when its last turn ended, i.e. in steady state; each
    turn still starts with one untimed "settle" batch so waking up is not timed either.
    (Where SIGSTOP does not exist, workers only block on their pipe.)
  * A turn is whole epochs by default, so chains whose work comes in a burst once per
    epoch (the naive whole-set shuffle refilling) get whole bursts, repeated until the
    turn lasts `turn_seconds`: a shard reader makes an epoch of 2,000 examples in ~20 ms,
    too short to time anything but waking up.
  * Stage throughputs are measured single-threaded in one more process, while every
    variant is frozen.
The worker side lives in `tfpipe.bench_worker`, the results and their table, JSON
and chart in `tfpipe.bench_report`.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import shutil
import sys
import tempfile
import time
from typing import Any, Mapping, Optional, Sequence, Union

from tfpipe import bench_worker, sources
from tfpipe.bench_report import (BenchResult, PrepareResult, RoundStats, StageReport, Turn,  # noqa: F401
                                 VariantResult, round_stats)
from tfpipe.config import PRESETS, TOGGLES, FeatureConfig, PipelineConfig, field_type
from tfpipe.errors import DataError

BASES = ("optimized", "naive", "keras", "shards")
DEFAULT_VARIANTS = ("naive", "optimized")
MAX_EPOCH_BATCHES = 50  # cap on the default turn of one epoch, so a big corpus still finishes in minutes

_PIPELINE_FIELDS = {f.name: f for f in dataclasses.fields(PipelineConfig)}
_FEATURE_FIELDS = {f.name: f for f in dataclasses.fields(FeatureConfig)}
_FIELDS = {**_PIPELINE_FIELDS, **_FEATURE_FIELDS}
_KERAS_FIELDS = ("batch_size", "seed", *_FEATURE_FIELDS)
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


@dataclasses.dataclass(frozen=True)
class Variant:
    """One input pipeline to time.

    Attributes:
      name: the spec it was parsed from, e.g. "optimized:fuse_maps=false".
      kind: "pipeline" (build_dataset over the data), "shards" (build_dataset over the
        shard folder) or "keras" (audio_dataset_from_directory + the same log-mel map).
      pipeline: its PipelineConfig (keras uses only batch_size and seed).
      features: its FeatureConfig.
      changed: the fields its spec set.
      reference: the variant its ratio compares to ("": the run's baseline).
    """

    name: str
    kind: str
    pipeline: PipelineConfig
    features: FeatureConfig
    changed: tuple[str, ...] = ()
    reference: str = ""

    def config(self) -> dict[str, Any]:
        """The full configuration, as plain dicts for JSON."""
        pipe = dataclasses.asdict(self.pipeline)
        if self.kind == "keras":
            pipe = {"recipe": "audio_dataset_from_directory(shuffle=True) -> repeat per epoch -> "
                              "map(log_mel, AUTOTUNE) -> prefetch(AUTOTUNE)",
                    "batch_size": pipe["batch_size"], "seed": pipe["seed"]}
        return {"pipeline": pipe, "features": dataclasses.asdict(self.features)}


def parse_value(field: str, text: str) -> Any:
    """Parses `text` as a value of the PipelineConfig or FeatureConfig field `field`.

    Raises:
      ValueError: unknown field (naming the allowed ones) or a value of the wrong type.
    """
    if field not in _FIELDS:
        raise ValueError(f"unknown field {field!r}; allowed fields: {', '.join(_FIELDS)}")
    spec = _FIELDS[field]
    kind = field_type(spec)
    text = text.strip()
    if spec.default is None and text.lower() in ("none", ""):
        return None
    if kind is bool:
        if text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        raise ValueError(f"{field}={text!r}: expected true or false")
    if kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            expected = "an integer" if kind is int else "a number"
            raise ValueError(f"{field}={text!r}: expected {expected}") from None
    choices = spec.metadata.get("choices")
    if choices and text not in choices:
        raise ValueError(f"{field}={text!r}: allowed values are {', '.join(choices)}")
    return text


def _parse_items(items: Sequence[str], spec: str) -> dict[str, Any]:
    """`field=value` items (or absl-style bare `prefetch` / `noprefetch`) -> typed values."""
    values = {}
    for item in items:
        key, eq, text = (part.strip() for part in item.partition("="))
        if not eq:
            bare = key[2:] if key.startswith("no") and key not in _FIELDS else key
            if bare in _FIELDS and isinstance(_FIELDS[bare].default, bool):
                values[bare] = bare == key
                continue
            raise ValueError(f"variant {spec!r}: {item!r} is not field=value (e.g. fuse_maps=false)")
        try:
            values[key] = parse_value(key, text)
        except ValueError as e:
            raise ValueError(f"variant {spec!r}: {e}") from None
    return values


def parse_variant(spec: str, features: Optional[FeatureConfig] = None,
                  overrides: Optional[Mapping[str, Any]] = None) -> Variant:
    """Parses a variant spec: `NAME[:field=value,...]`.

    NAME is a preset (`optimized`, `naive`), `keras` (the recipe a Keras user would
    write; takes batch_size, seed and FeatureConfig fields) or `shards` (the shard
    folder, optimized preset; `shards:naive,...` for the naive one). Fields are
    PipelineConfig and FeatureConfig fields, e.g. `optimized:fuse_maps=false`,
    `naive:backend=librosa`, `optimized:batch_size=32,n_mels=40`.

    Args:
      spec: the spec.
      features: FeatureConfig the spec's feature fields start from.
      overrides: typed field values applied to every variant before its own.

    Raises:
      ValueError: unknown name or field, or a bad value, naming the allowed ones.
    """
    name = spec.strip()
    base, _, rest = (part.strip() for part in name.partition(":"))
    if base not in BASES:
        raise ValueError(f"variant {spec!r}: unknown name {base!r}; allowed: {', '.join(BASES)}, "
                         f"each optionally with :field=value,... "
                         f"(e.g. optimized:fuse_maps=false, naive:backend=librosa)")
    items = [i.strip() for i in rest.split(",") if i.strip()]
    preset = "naive" if base == "naive" else "optimized"
    if base == "shards" and items and items[0] in PRESETS:
        preset = items.pop(0)
    own = _parse_items(items, name)
    if base == "keras" and set(own) - set(_KERAS_FIELDS):
        raise ValueError(f"variant {spec!r}: keras takes only batch_size, seed and FeatureConfig fields, "
                         f"not {', '.join(sorted(set(own) - set(_KERAS_FIELDS)))}")
    values = {**(overrides or {}), **own}
    unknown = sorted(set(values) - set(_FIELDS))
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}; allowed fields: {', '.join(_FIELDS)}")
    try:
        pipeline = PipelineConfig.preset(preset, **{k: v for k, v in values.items() if k in _PIPELINE_FIELDS})
        feats = dataclasses.replace(features or FeatureConfig(),
                                    **{k: v for k, v in values.items() if k in _FEATURE_FIELDS})
    except ValueError as e:
        raise ValueError(f"variant {spec!r}: {e}") from None
    kind = base if base in ("keras", "shards") else "pipeline"
    return Variant(name, kind, pipeline, feats, tuple(own))


def split_variants(text: str) -> list[str]:
    """Splits a comma-separated variant list, keeping each variant's overrides with it.

    'naive,optimized:fuse_maps=false,n_mels=40,keras' ->
    ['naive', 'optimized:fuse_maps=false,n_mels=40', 'keras'].

    A comma starts a new variant only before a name (the part before ':' is one of
    BASES); anything else continues the previous variant's overrides.
    """
    specs: list[str] = []
    for token in (t.strip() for t in text.split(",")):
        if token.partition(":")[0].strip() in BASES or not specs:
            specs.append(token)
        elif token:
            specs[-1] += ("," if ":" in specs[-1] else ":") + token
    return [s for s in specs if s]


def ablation_variants(features: Optional[FeatureConfig] = None,
                      overrides: Optional[Mapping[str, Any]] = None) -> list[Variant]:
    """optimized and naive, then each TOGGLE flipped alone in each, then the other feature backend.

    From optimized, flipping a toggle gives its naive value (prefetch_to_device, off in
    both presets, is switched on); from naive, it switches the optimization on.
    """
    out = []
    for preset in ("optimized", "naive"):
        base = parse_variant(preset, features, overrides)
        out.append(base)
        flips = [f"{t}={str(not getattr(base.pipeline, t)).lower()}" for t in TOGGLES]
        flips.append(f"backend={'librosa' if base.features.backend == 'tf' else 'tf'}")
        out += [dataclasses.replace(parse_variant(f"{preset}:{flip}", features, overrides), reference=preset)
                for flip in flips]
    return out


def resolve_variants(variants: Sequence[Union[str, Variant]], features: Optional[FeatureConfig] = None,
                     overrides: Optional[Mapping[str, Any]] = None, ablation: bool = False,
                     baseline: Optional[str] = None) -> list[Variant]:
    """The variants to run, each with its reference set: specs parsed, ablation added, duplicates dropped."""
    chosen = [v if isinstance(v, Variant) else parse_variant(v, features, overrides) for v in variants]
    chosen += ablation_variants(features, overrides) if ablation else []
    first: dict[str, Variant] = {}
    for v in chosen:
        first.setdefault(v.name, v)  # a user's own spec wins over the same one from the ablation
    unique = list(first.values())
    if not unique:
        raise ValueError("no variants to run; name some, e.g. --variants naive,optimized")
    names = [v.name for v in unique]
    baseline = baseline or names[0]
    if baseline not in names:
        raise ValueError(f"baseline {baseline!r} is not one of the variants: {', '.join(names)}")
    return [dataclasses.replace(v, reference=baseline if v.name == baseline else v.reference or baseline)
            for v in unique]


def _note(v: Variant, source_kind: str, gpu: bool) -> str:
    """Why a changed field cannot matter here, so a flat bar is not read as a finding."""
    notes = []
    if "prefetch_to_device" in v.changed and v.pipeline.prefetch_to_device and not gpu:
        notes.append("no-op: no GPU visible")
    if "parallel_reads" in v.changed and v.kind == "pipeline" and source_kind == "wav":
        notes.append("no-op: wav source (parallel_reads interleaves shard files)")
    if "deterministic" in v.changed and v.kind == "pipeline" and not v.pipeline.parallel_map:
        notes.append("no-op: maps are sequential")
    if v.kind == "keras":
        notes.append("Keras recipe")
    return "; ".join(notes)


def _machine(tf_version: str, gpu: bool) -> dict[str, Any]:
    """Cores, usable cores, versions, platform and GPU."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cores": os.cpu_count(), "usable_cores": usable, "tf_version": tf_version,
            "python": platform.python_version(), "platform": platform.platform(), "gpu": gpu}


def _progress(total: int, enabled: bool) -> Any:
    """A single-line tqdm bar on stderr whose description names the current step."""
    from tqdm import tqdm

    return tqdm(total=total, file=sys.stderr, disable=not enabled, leave=False, dynamic_ncols=True,
                bar_format="{desc} {bar:20} {n_fmt}/{total_fmt} [{elapsed}<{remaining}] {postfix}")


def run(data: Union[str, os.PathLike], variants: Sequence[Union[str, Variant]] = DEFAULT_VARIANTS, *,
        shards: Optional[Union[str, os.PathLike]] = None, ablation: bool = False,
        baseline: Optional[str] = None,
        step_ms: float = 0.0, batches: Optional[int] = None, turn_seconds: float = 1.0,
        repeats: int = 5, warmup: int = 3, features: Optional[FeatureConfig] = None,
        overrides: Optional[Mapping[str, Any]] = None,
        stages: bool = True, stage_seconds: float = 0.5, progress: bool = True) -> BenchResult:
    """Times input-pipeline variants side by side, each in its own process, in alternating rounds.

    Args:
      data: wav folder (one subfolder per class), CSV manifest or shard folder.
      variants: specs (see `parse_variant`) or Variant objects; the first is the baseline.
      shards: shard folder the `shards` variants read.
      ablation: add optimized and naive with each toggle flipped alone, and the other backend.
      baseline: the variant ratios compare to (ablation rows compare to their preset).
      step_ms: simulated accelerator step per batch (sleep), 0 = none.
      batches: batches timed per variant per round. Default: one epoch of each variant's
        batch size (at most MAX_EPOCH_BATCHES), so a chain whose work comes in bursts
        once per epoch (the naive whole-set shuffle refills) gets whole bursts per turn,
        repeated until the turn lasts `turn_seconds`.
      turn_seconds: with the default `batches`, a turn repeats its epoch until it has
        lasted this long (fast variants are timed in steady state, not waking up).
      repeats: rounds.
      warmup: untimed batches after the first one.
      features: FeatureConfig the variants start from.
      overrides: typed PipelineConfig/FeatureConfig field values applied to every variant.
      stages: also measure the single-thread rate of each stage of the wav chain.
      stage_seconds: time budget per stage measurement.
      progress: show a progress line on stderr.

    Returns:
      BenchResult (`.table()`, `.to_json()`, `.plot(path)`).

    Raises:
      ValueError / DataError: bad variant specs, settings or data, by name.
    """
    started = time.perf_counter()
    for name, value, low in (("batches", batches, 1), ("turn_seconds", turn_seconds, 0),
                             ("repeats", repeats, 1), ("warmup", warmup, 0), ("step_ms", step_ms, 0),
                             ("stage_seconds", stage_seconds, 0.01)):
        if value is not None and value < low:
            raise ValueError(f"{name}={value!r}: must be >= {low}")
    features = dataclasses.replace(features or FeatureConfig(), **{k: v for k, v in (overrides or {}).items()
                                                                   if k in _FEATURE_FIELDS})
    source = sources.find_examples(data)
    chosen = resolve_variants(variants, features, overrides, ablation, baseline)
    wav_variants = [v for v in chosen if v.kind != "shards"]
    if source.kind == "wav":  # unusable files fail here, by name, before workers start
        for rate in sorted({v.features.sample_rate for v in wav_variants}):
            try:
                sources.scan_wavs(source.paths, dataclasses.replace(features, sample_rate=rate))
            except DataError as e:
                names = ", ".join(repr(v.name) for v in wav_variants if v.features.sample_rate == rate)
                raise DataError(f"variant {names}: {e}") from e
    epoch = _check_sources(chosen, source, data, shards)
    turn_batches = {v.name: batches or min(MAX_EPOCH_BATCHES, max(1, epoch[v.kind] // v.pipeline.batch_size))
                    for v in chosen}
    min_turn_s = 0.0 if batches else turn_seconds  # --batches asks for exactly that many
    measure_stages = stages and source.kind == "wav" and bool(wav_variants)
    backends = sorted({v.features.backend for v in wav_variants}, key=("tf", "librosa").index)
    # Stages (and the ideal) are measured on the first wav variant's features and batch size.
    staged = wav_variants[0] if wav_variants else None
    common = {"data": os.path.abspath(data), "shards": shards and os.path.abspath(shards),
              "features": staged.features if staged else features}
    phases = {}

    def phase(name: str) -> None:
        phases[name] = time.perf_counter() - started - sum(phases.values())

    bar = _progress(len(chosen) * (1 + repeats) + measure_stages, progress)
    bar.set_description_str(f"bench: starting {len(chosen)} workers")
    ctx = bench_worker.context()
    watchdog = bench_worker.Watchdog()
    workers: list[bench_worker.Worker] = []
    try:
        jobs = [(v.name, v) for v in chosen] + [("stages", None)] * measure_stages
        for name, variant in jobs:
            workers.append(bench_worker.Worker(ctx, name, {**common, "variant": variant}))
            watchdog.watch(workers[-1].process.pid)
        ready = [w.receive() for w in workers]
        machine = _machine(ready[0]["tf_version"], ready[0]["gpu"])  # as a worker sees it
        phase("start")
        builds = []
        for w in workers[:len(chosen)]:
            bar.set_description_str(f"bench: build {w.name}")
            builds.append(w.call("build", warmup=warmup))
            bar.update()
        phase("build")
        turns: dict[str, list[Turn]] = {v.name: [] for v in chosen}
        for r in range(repeats):
            for w in workers[:len(chosen)]:
                bar.set_description_str(f"bench: round {r + 1}/{repeats} {w.name}")
                turn = w.call("time", batches=turn_batches[w.name], step_s=step_ms / 1000, min_s=min_turn_s)
                turns[w.name].append(Turn(**turn))
                bar.update()
        phase("rounds")
        reports = []
        if measure_stages:
            bar.set_description_str("bench: stages")
            cores = machine["usable_cores"]
            measured = workers[-1].call("stages", backends=backends, batch_size=staged.pipeline.batch_size,
                                        budget_s=stage_seconds)
            reports = [StageReport(cores=cores, **r) for r in measured]
            bar.update()
        phase("stages")
        peaks = [w.call("stop") for w in workers[:len(chosen)]]
    finally:
        bar.close()
        for w in workers:
            w.close()
        watchdog.close()

    stats = round_stats(turns, {v.name: v.reference for v in chosen})
    baseline_name = next(v.name for v in chosen if v.reference == v.name)
    to_baseline = round_stats(turns, {v.name: baseline_name for v in chosen})
    ideals = {r.backend: r.ideal for r in reports}
    results = []
    for v, info, build, peak in zip(chosen, ready, builds, peaks):
        like_staged = staged and v.kind != "shards" and v.pipeline.batch_size == staged.pipeline.batch_size \
            and dataclasses.replace(v.features, backend="tf") == dataclasses.replace(staged.features, backend="tf")
        ideal = ideals.get(v.features.backend) if like_staged else None  # only like for like
        if ideal and step_ms:
            ideal = min(ideal, v.pipeline.batch_size * 1000.0 / step_ms)  # the step caps what input can use
        note = _note(v, source.kind, machine["gpu"])
        results.append(VariantResult(v.name, v.kind, v.reference, v.config(), note, tuple(turns[v.name]),
                                     stats[v.name], build["first_batch_s"], info["import_rss_mb"],
                                     peak["peak_rss_mb"], ideal, to_baseline[v.name].ratio))
    settings = {"data": os.path.abspath(data), "shards": common["shards"],
                "num_examples": source.num_examples,
                "num_classes": len(source.class_names), "variants": [v.name for v in chosen],
                "baseline": baseline_name, "ablation": ablation,
                "batches": batches, "turn_batches": turn_batches,
                "turn_seconds": min_turn_s, "repeats": repeats, "warmup": warmup,
                "settle_batches": bench_worker.SETTLE_BATCHES, "step_ms": step_ms,
                "batch_size": chosen[0].pipeline.batch_size, "stage_seconds": stage_seconds,
                "features": dataclasses.asdict(features), "overrides": dict(overrides or {}),
                "frozen_while_idle": bench_worker.FREEZE}
    phase("stop")
    wall = time.perf_counter() - started
    return BenchResult(settings, machine, tuple(results), tuple(reports), wall, phases)


def _check_sources(chosen: Sequence[Variant], source: sources.Source, data: Any,
                   shards: Any) -> dict[str, int]:
    """Checks each variant kind has its input (ValueError: what to pass); returns examples per kind."""
    kinds = {v.kind for v in chosen}
    epoch = {"pipeline": source.num_examples, "keras": source.num_examples}
    if "shards" in kinds:
        if not shards:
            raise ValueError("the shards variants read a shard folder: pass --shards DIR "
                             "(write one with `tfpipe prepare`)")
        shard_source = sources.find_examples(shards)
        if shard_source.kind != "shards":
            raise ValueError(f"--shards {shards}: not a shard folder (no {sources.INDEX_NAME}); "
                             f"write one with `tfpipe prepare`")
        epoch["shards"] = shard_source.num_examples
    if "keras" in kinds and not (source.kind == "wav" and os.path.isdir(data)):
        raise ValueError(f"{data}: the keras variant reads a wav folder with one subfolder per class "
                         f"(audio_dataset_from_directory), not a CSV or shard folder")
    return epoch


def run_prepare(data: Union[str, os.PathLike], workers: Sequence[int] = (1, 2), *, repeats: int = 3,
                num_shards: int = 8, features: Optional[FeatureConfig] = None, store: str = "log_mel",
                progress: bool = True) -> PrepareResult:
    """Times `tfpipe.write_shards` for each worker count, alternating, after one untimed run.

    Each run writes to a fresh folder (removed after), so no run resumes another's shards.

    Args:
      data: wav folder or CSV manifest.
      workers: worker counts to compare (0: in this process); the first is the speedup's reference.
      repeats: timed runs per worker count.
      num_shards: shards written each run.
      features: FeatureConfig for write_shards.
      store: "log_mel" or "waveform".
      progress: show a progress line on stderr.

    Returns:
      PrepareResult (`.table()`, `.to_json()`).
    """
    from tfpipe import shards as shard_writer

    workers = tuple(dict.fromkeys(int(w) for w in workers))
    if not workers or min(workers) < 0 or repeats < 1:
        raise ValueError(f"workers={list(workers)}, repeats={repeats}: need worker counts >= 0 "
                         f"(0: in this process) and repeats >= 1")
    features = features or FeatureConfig()
    seconds: dict[int, list[float]] = {w: [] for w in workers}
    writing: dict[int, list[float]] = {w: [] for w in workers}
    bar = _progress(1 + repeats * len(workers), progress)
    with tempfile.TemporaryDirectory(prefix="tfpipe-bench-prepare-") as tmp:

        def write(num_workers: int) -> tuple[float, float, dict]:
            out = os.path.join(tmp, "shards")
            bar.set_description_str(f"bench --prepare: {num_workers} workers")
            start = time.perf_counter()
            index, stats = shard_writer.write_shards_with_stats(
                data, out, num_shards=num_shards, num_workers=num_workers, features=features, store=store,
                progress=False)
            elapsed = time.perf_counter() - start
            shutil.rmtree(out)
            bar.update()
            return elapsed, stats.writing_seconds, index

        index = write(workers[0])[2]  # untimed: fills the page cache, so the first timed run is not favoured
        for _ in range(repeats):
            for w in workers:
                elapsed, after_startup, _ = write(w)
                seconds[w].append(elapsed)
                writing[w].append(after_startup)
    bar.close()
    import tensorflow as tf

    machine = _machine(tf.__version__, bool(tf.config.list_physical_devices("GPU")))
    settings = {"data": os.path.abspath(data), "num_shards": num_shards, "store": store, "repeats": repeats,
                "num_examples": index["num_examples"], "rejected": len(index.get("rejected", [])),
                "features": dataclasses.asdict(features)}
    return PrepareResult(settings, machine, {w: tuple(s) for w, s in seconds.items()},
                         {w: tuple(s) for w, s in writing.items()})
