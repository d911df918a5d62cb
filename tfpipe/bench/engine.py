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
    too short to time anything but waking up. For a user's own dataset, its worker reports the epoch of the built chain (the last finite op, e.g. the batches
    before the seed's final repeat), or USER_TURN_BATCHES where it cannot tell.
  * With `cores`, every variant runs once per core count, each process pinned to that
    many cores (sched_setaffinity, before TensorFlow sizes its thread pools), and takes
    its turns like any other variant: the speed-up to the first count is a ratio within
    rounds too.
  * Stage throughputs are measured single-threaded in one more process, and per-op
    rates (`ops`) in each variant's own process, while every other process is frozen.
    The stages are those of the data's domain (its source's `chain_input`): wav files
    read -> decode -> features, images read -> decode -> scale, ..., measured once per
    distinct feature config among the variants that read the data (at most two).
The worker side lives in `tfpipe.bench.worker`, the results and their table and JSON
in `tfpipe.bench.report`, the chart in `tfpipe.bench.chart`, per-op rates in
`tfpipe.bench.ops`, the variant specs in `tfpipe.bench.variants`.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import shutil
import sys
import tempfile
import time
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from tfpipe.core import source as sources
from tfpipe.bench import domains as bench_domains
from tfpipe.bench import user_fns
from tfpipe.bench import worker as bench_worker
from tfpipe.bench.report import BenchResult, PrepareResult, StageReport, Turn, VariantResult, round_stats
from tfpipe.bench.variants import DEFAULT_VARIANTS, USER_KINDS, Variant, resolve_variants, with_cores
from tfpipe.domains.audio.config import AudioConfig
from tfpipe.errors import DataError

MAX_EPOCH_BATCHES = 50  # cap on the default turn of one epoch, so a big corpus still finishes in minutes
USER_TURN_BATCHES = 10  # the turn of a user dataset whose epoch cannot be told from its chain
MAX_STAGE_CONFIGS = 2  # distinct feature configs whose stages are measured (each costs a few seconds)
_DATA_KINDS = ("pipeline", "keras")  # the variants that read `data`


def _note(v: Variant, source_kind: str, gpu: bool) -> str:
    """Why a changed field cannot matter here, so a flat bar is not read as a finding."""
    notes = []
    if "prefetch_to_device" in v.changed and not gpu:
        notes.append("no-op: no GPU visible")
    if "parallel_reads" in v.changed and v.kind == "pipeline" and source_kind not in ("", "shards"):
        notes.append(f"no-op: {source_kind} source (parallel_reads interleaves shard files)")
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


def run(data: Optional[Union[str, os.PathLike]] = None,
        variants: Optional[Sequence[Union[str, Variant]]] = None, *,
        dataset_fn: Optional[Union[str, Callable]] = None, input_fns: Sequence[Union[str, Callable]] = (),
        cores: Optional[Sequence[int]] = None, ops: bool = False,
        shards: Optional[Union[str, os.PathLike]] = None, ablation: bool = False,
        baseline: Optional[str] = None,
        step_ms: float = 0.0, batches: Optional[int] = None, turn_seconds: float = 1.0,
        repeats: int = 5, warmup: int = 3, features: Any = None,
        overrides: Optional[Mapping[str, Any]] = None,
        stages: bool = True, stage_seconds: float = 0.5, progress: bool = True) -> BenchResult:
    """Times input-pipeline variants side by side, each in its own process, in alternating rounds.

    Args:
      data: a folder with one subfolder per class (wav, images: any registered domain), CSV
        manifest or shard folder; needed by the tfpipe-built variants (not by dataset_fn /
        input_fn ones). Its domain decides the feature config variants and overrides edit.
      variants: specs (see `parse_variant`) or Variant objects; the first is the baseline.
        Default: naive, optimized (none when only input_fns are given).
      dataset_fn: your own pipeline, `FUNCTION(pipeline: PipelineConfig, mode: str) ->
        tf.data.Dataset`, as a module-level function or its "MODULE:FUNCTION" /
        "FILE.py:FUNCTION" spec: each variant (and `ablation`) is the PipelineConfig handed to it.
      input_fns: plain Estimator input_fns (functions or specs) to A/B, each a variant named
        by its spec; called with only the arguments they name (params={"batch_size": ...}).
      cores: run every variant once per core count, its process pinned to that many cores;
        speed-ups compare to the first count.
      ops: also time each dataset op of every variant's final chain on one thread and name
        the op that limits it.
      shards: shard folder the `shards` variants read.
      ablation: add optimized and naive with each toggle flipped alone, and the other backend
        (where the data's config has one).
      baseline: the variant ratios compare to (ablation rows compare to their preset).
      step_ms: simulated accelerator step per batch (sleep), 0 = none.
      batches: batches timed per variant per round. Default: one epoch of each variant's
        batch size (at most MAX_EPOCH_BATCHES; a user's dataset: the epoch its chain shows), so
        a chain whose work comes in bursts once per epoch (the naive whole-set shuffle
        refills) gets whole bursts per turn, repeated until the turn lasts `turn_seconds`.
      turn_seconds: with the default `batches`, a turn repeats its epoch until it has
        lasted this long (fast variants are timed in steady state, not waking up).
      repeats: rounds.
      warmup: untimed batches after the first one.
      features: the domain config the variants start from (AudioConfig for wavs, ImageConfig
        for images; default: the domain's default).
      overrides: typed PipelineConfig and domain config field values applied to every variant.
      stages: also measure the single-thread rate of each stage of the data's domain chain
        (per distinct feature config, at most MAX_STAGE_CONFIGS), the limiting stage and the ideal.
      stage_seconds: time budget per stage (and per op) measurement.
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
    core_counts = tuple(dict.fromkeys(int(c) for c in cores)) if cores else ()
    cpus = {c: bench_worker.pin_cpus(c) for c in core_counts}  # ValueError: more than usable
    fn = user_fns.fn_spec(dataset_fn) if dataset_fn is not None else ""
    input_specs = [user_fns.fn_spec(f) for f in input_fns]
    if variants is None:
        variants = () if input_specs and not fn else DEFAULT_VARIANTS
    source = sources.find(data) if data is not None else None
    domain = bench_domains.of_data(source, shards)
    features = bench_domains.base_features(domain, features, overrides, data)
    chosen = resolve_variants(variants, features, overrides, ablation, baseline, dataset_fn=fn,
                              input_fns=input_specs)
    readers = [v for v in chosen if v.kind in _DATA_KINDS]
    if readers and data is None:
        raise ValueError(f"variant(s) {', '.join(v.name for v in readers)} read data: pass data= (--data: a class "
                         f"folder, CSV or shard folder), or time your own pipeline with dataset_fn= / input_fns=")
    if domain is not None and bench_domains.is_file_source(source):  # bad files fail here, before workers start
        for config in dict.fromkeys(v.features for v in readers):
            try:
                domain.file_table(source.paths, config)
            except DataError as e:
                names = ", ".join(repr(v.name) for v in readers if v.features == config)
                raise DataError(f"variant {names}: {e}") from e
    epoch = _check_sources(chosen, source, data, shards, domain)
    # A user's dataset reports its own epoch once built (USER_TURN_BATCHES if it cannot tell).
    turn_batches = {v.name: batches or min(MAX_EPOCH_BATCHES, max(1, epoch[v.kind] // v.pipeline.batch_size))
                    for v in chosen if v.kind not in USER_KINDS}
    min_turn_s = 0.0 if batches else turn_seconds  # --batches asks for exactly that many
    # Stages (and the ideal) per distinct feature config of the variants reading the data, each at
    # the batch size of the first variant with it; a variant gets the ideal of its own config only.
    staged = bench_domains.stage_configs(domain, readers, MAX_STAGE_CONFIGS) if stages and domain is not None else []
    measure_stages = bool(staged)
    common = {"data": data and os.path.abspath(data), "shards": shards and os.path.abspath(shards),
              "sys_path": list(sys.path)}
    runs = with_cores(chosen, core_counts)
    phases = {}

    def phase(name: str) -> None:
        phases[name] = time.perf_counter() - started - sum(phases.values())

    bar = _progress(len(runs) * (1 + repeats) + measure_stages + ops * len(chosen), progress)
    bar.set_description_str(f"bench: starting {len(runs)} workers")
    ctx = bench_worker.context()
    watchdog = bench_worker.Watchdog()
    workers: list[bench_worker.Worker] = []
    try:
        jobs = [(v.key, {"variant": v, "cpus": cpus.get(v.cores)}) for v in runs]
        jobs += [("stages", {"variant": None})] * measure_stages
        for name, job in jobs:
            workers.append(bench_worker.Worker(ctx, name, {**common, **job}))
            watchdog.watch(workers[-1].process.pid)
        ready = [w.receive() for w in workers]
        machine = _machine(ready[0]["tf_version"], ready[0]["gpu"])  # as a worker sees it
        phase("start")
        builds = []
        for w in workers[:len(runs)]:
            bar.set_description_str(f"bench: build {w.name}")
            builds.append(w.call("build", warmup=warmup))
            bar.update()
        for v, build in zip(runs, builds):
            if v.name not in turn_batches:  # a user's dataset: the first of its runs decides
                epoch_batches = build["epoch_batches"] or USER_TURN_BATCHES
                turn_batches[v.name] = batches or min(MAX_EPOCH_BATCHES, epoch_batches)
        phase("build")
        turns: dict[str, list[Turn]] = {v.key: [] for v in runs}
        for r in range(repeats):
            for v, w in zip(runs, workers):
                bar.set_description_str(f"bench: round {r + 1}/{repeats} {w.name}")
                turn = w.call("time", batches=turn_batches[v.name], step_s=step_ms / 1000, min_s=min_turn_s)
                turns[v.key].append(Turn(**turn))
                bar.update()
        phase("rounds")
        reports = []
        if measure_stages:
            bar.set_description_str("bench: stages")
            measured = workers[-1].call("stages", configs=staged, budget_s=stage_seconds)
            reports = [StageReport(cores=machine["usable_cores"], features=dataclasses.asdict(config), **r)
                       for (_, config, _), r in zip(staged, measured)]
            bar.update()
        phase("stages")
        op_reports = []
        for v in chosen if ops else ():
            # In the variant's run with the most cores: the op rates are single-thread, the
            # cores only credit its parallel ops.
            i = max((i for i, r in enumerate(runs) if r.name == v.name), key=lambda i: ready[i]["usable_cores"])
            bar.set_description_str(f"bench: ops of {v.name}")
            op_reports.append(workers[i].call("ops", budget_s=stage_seconds, cores=ready[i]["usable_cores"]))
            bar.update()
        phase("ops")
        peaks = [w.call("stop") for w in workers[:len(runs)]]
    finally:
        bar.close()
        for w in workers:
            w.close()
        watchdog.close()

    keys = {(v.name, v.cores): v.key for v in runs}
    stats = round_stats(turns, {v.key: keys[v.reference, v.cores] for v in runs})
    baseline_name = next(v.name for v in chosen if v.reference == v.name)
    to_baseline = round_stats(turns, {v.key: keys[baseline_name, v.cores] for v in runs})
    to_first = round_stats(turns, {v.key: keys[v.name, runs[0].cores] for v in runs}) if core_counts else {}
    results = []
    for v, info, build, peak in zip(runs, ready, builds, peaks):
        report = next((r for (_, config, batch_size), r in zip(staged, reports)
                       if v.kind in _DATA_KINDS and (v.features, v.pipeline.batch_size) == (config, batch_size)), None)
        ideal = report.best_rate * info["usable_cores"] if report else None  # like for like, its own cores
        if ideal and step_ms:
            ideal = min(ideal, v.pipeline.batch_size * 1000.0 / step_ms)  # the step caps what input can use
        note = "; ".join(filter(None, [_note(v, source.kind if source else "", machine["gpu"]),
                                       "finite dataset: repeated" if build.get("repeated") else ""]))
        results.append(VariantResult(v.name, v.kind, v.reference, v.config(), note, tuple(turns[v.key]),
                                     stats[v.key], build["first_batch_s"], info["import_rss_mb"],
                                     peak["peak_rss_mb"], ideal, to_baseline[v.key].ratio,
                                     cores=info["usable_cores"], pinned=v.cores is not None,
                                     speedup=to_first[v.key].ratio if core_counts else None,
                                     batch_spec=build.get("batch_spec", "")))
    settings = {"data": common["data"], "shards": common["shards"], "domain": domain.name if domain else None,
                "num_examples": source.num_examples if source else None,
                "num_classes": len(source.class_names) if source else None, "variants": [v.name for v in chosen],
                "baseline": baseline_name, "ablation": ablation, "dataset_fn": fn or None,
                "input_fns": input_specs, "cores": list(core_counts) or None, "ops": ops,
                "batches": batches, "turn_batches": turn_batches,
                "turn_seconds": min_turn_s, "repeats": repeats, "warmup": warmup,
                "settle_batches": bench_worker.SETTLE_BATCHES, "step_ms": step_ms,
                "batch_size": chosen[0].pipeline.batch_size, "stage_seconds": stage_seconds,
                "features": dataclasses.asdict(features), "overrides": dict(overrides or {}),
                "frozen_while_idle": bench_worker.FREEZE}
    phase("stop")
    wall = time.perf_counter() - started
    return BenchResult(settings, machine, tuple(results), tuple(reports), wall, phases, tuple(op_reports))


def _check_sources(chosen: Sequence[Variant], source: Optional[sources.Source], data: Any,
                   shards: Any, domain: Any = None) -> dict[str, int]:
    """Checks each variant kind has its input (ValueError: what to pass); returns examples per kind."""
    kinds = {v.kind for v in chosen}
    epoch = {"pipeline": source.num_examples, "keras": source.num_examples} if source else {}
    if "shards" in kinds:
        if not shards:
            raise ValueError("the shards variants read a shard folder: pass --shards DIR "
                             "(write one with `tfpipe prepare`)")
        shard_source = sources.find(shards)
        if shard_source.kind != "shards":
            raise ValueError(f"--shards {shards}: not a shard folder (no {sources.INDEX_NAME}); "
                             f"write one with `tfpipe prepare`")
        epoch["shards"] = shard_source.num_examples
    if "keras" in kinds:
        if domain is None or not bench_domains.is_file_source(source) or not os.path.isdir(data):
            raise ValueError(f"{data}: the keras variant reads a folder with one subfolder per class (the "
                             f"domain's tf.keras.utils.*_dataset_from_directory recipe), not a CSV or shard folder")
        if not bench_domains.has_keras_recipe(domain):
            raise ValueError(f"{data}: the keras variant needs the {domain.name} domain's Keras recipe "
                             f"({bench_domains.recipe_module(domain)}.{bench_domains.RECIPE_FN}), which it lacks")
    return epoch


def run_prepare(data: Union[str, os.PathLike], workers: Sequence[int] = (1, 2), *, repeats: int = 3,
                num_shards: int = 8, features: Optional[AudioConfig] = None, store: str = "log_mel",
                progress: bool = True) -> PrepareResult:
    """Times `tfpipe.write_shards` for each worker count, alternating, after one untimed run.

    Each run writes to a fresh folder (removed after), so no run resumes another's shards.

    Args:
      data: wav folder or CSV manifest.
      workers: worker counts to compare (0: in this process); the first is the speedup's reference.
      repeats: timed runs per worker count.
      num_shards: shards written each run.
      features: AudioConfig for write_shards.
      store: "log_mel" or "waveform".
      progress: show a progress line on stderr.

    Returns:
      PrepareResult (`.table()`, `.to_json()`).
    """
    from tfpipe.storage.writer import write_shards_with_stats

    workers = tuple(dict.fromkeys(int(w) for w in workers))
    if not workers or min(workers) < 0 or repeats < 1:
        raise ValueError(f"workers={list(workers)}, repeats={repeats}: need worker counts >= 0 "
                         f"(0: in this process) and repeats >= 1")
    features = features or AudioConfig()
    seconds: dict[int, list[float]] = {w: [] for w in workers}
    writing: dict[int, list[float]] = {w: [] for w in workers}
    bar = _progress(1 + repeats * len(workers), progress)
    with tempfile.TemporaryDirectory(prefix="tfpipe-bench-prepare-") as tmp:

        def write(num_workers: int) -> tuple[float, float, dict]:
            out = os.path.join(tmp, "shards")
            bar.set_description_str(f"bench --prepare: {num_workers} workers")
            start = time.perf_counter()
            index, stats = write_shards_with_stats(
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
