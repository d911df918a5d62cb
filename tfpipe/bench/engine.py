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
    too short to time anything but waking up. For a user's own dataset, its worker reports
    the epoch of the built chain (the last finite op, e.g. the batches before the seed's
    final repeat), or USER_TURN_BATCHES where it cannot tell.
  * With `cores`, every variant runs once per core count, each process pinned to that
    many cores (sched_setaffinity, before TensorFlow sizes its thread pools), and takes
    its turns like any other variant: the speed-up to the first count is a ratio within
    rounds too.
  * Stage throughputs are measured single-threaded in one more process, and per-op
    rates (`ops`) in each variant's own process, while every other process is frozen.
    The stages are those of the data's domain (its source's `chain_input`): wav files
    read -> decode -> features, images read -> decode -> scale, ..., measured once per
    distinct feature config among the variants that read the data (at most two).
  * A run too small to trust says so (`caveats`), with the data it would need.
The workers are driven by `session`, the variants are `variants` (parsed by `specs`), the
results and their table and JSON are `report`, the chart `chart`.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from tfpipe.bench import domains as bench_domains
from tfpipe.bench import user_fns
from tfpipe.bench import worker as bench_worker
from tfpipe.bench.ceiling import Ceiling
from tfpipe.bench.report import BenchResult, StageReport, Turn, VariantResult, round_stats
from tfpipe.bench import session as session_lib
from tfpipe.bench.session import Session
from tfpipe.bench.specs import DEFAULT_VARIANTS, resolve_variants, with_cores
from tfpipe.bench.variants import Inputs, Variant
from tfpipe.config import config_field, validate
from tfpipe.errors import DataError

MAX_EPOCH_BATCHES = 50  # cap on the default turn of one epoch, so a big corpus still finishes in minutes
USER_TURN_BATCHES = 10  # the turn of a user dataset whose epoch cannot be told from its chain
MAX_STAGE_CONFIGS = 2  # distinct feature configs whose stages are measured (each costs a few seconds)


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How `tfpipe bench` times its variants; each field is also its flag (--cores is a list flag of its own).

    Attributes:
      batches: batches timed per variant per round (None: whole epochs, for `turn_seconds`).
      turn_seconds: without `batches`, each turn repeats its epoch until it has lasted this long.
      repeats: rounds.
      warmup: untimed batches after the first one.
      step_ms: simulated accelerator step per batch (a sleep), 0 = none.
      stages: measure the one-thread rate of each stage of the data's domain, the limit and its stage.
      stage_seconds: time budget of each stage (and op) measurement.
      ops: time each dataset op of every variant's final chain on one thread.
      ceiling: measure each variant's per-element ceiling (its one-thread ops; with `ops`, from the same timing).
      cores: run every variant once per core count, pinned to that many cores (empty: not pinned).
    """

    batches: Optional[int] = config_field(None, "Batches timed per variant per round (default: whole epochs of at "
                                                "most 50 batches, for --turn_seconds).", min=1, type=int)
    turn_seconds: float = config_field(1.0, "Without --batches, each turn repeats its epoch until it has lasted "
                                            "this long, so fast variants are timed in steady state.", min=0.0)
    repeats: int = config_field(5, "Rounds; every variant takes one turn per round (--prepare: runs per worker "
                                   "count).", min=1)
    warmup: int = config_field(3, "Untimed batches after the first one.", min=0)
    step_ms: float = config_field(0.0, "Simulated accelerator step per batch, in ms of sleep: shows how much of the "
                                       "step the input hides (prefetch: max(input, step) instead of input + step).",
                                  min=0.0)
    stages: bool = config_field(True, "Measure the one-thread rate of each stage of the data's domain (its read, "
                                      "decode, features, ... as it names them), the stage that limits the "
                                      "pipeline and its limit (its rate x the cores), once per distinct feature "
                                      "config among the variants (at most 2).")
    stage_seconds: float = config_field(0.5, "Time budget of each stage measurement.", min=0.01)
    ops: bool = config_field(False, "Also time each dataset op of every variant's final chain on one thread "
                                    "(shown by op type and the name given with name=) and name the op that limits it.")
    ceiling: bool = config_field(True, "Measure each variant's per-element ceiling: the ops of its final chain that "
                                       "run on one thread (all but parallel maps and interleaves) timed alone; the "
                                       "slowest caps the chain on any host, so the report says how many cores it can "
                                       "use (ceiling / examples per second per core).")
    cores: tuple = config_field((), "Core counts to pin every variant to in turn.")

    def __post_init__(self):
        try:
            counts = tuple(dict.fromkeys(int(c) for c in self.cores or ()))
        except (TypeError, ValueError):
            raise ValueError(f"RunOptions.cores={self.cores!r}: expected core counts, e.g. (1, 2)") from None
        object.__setattr__(self, "cores", counts)
        validate(self)


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What a run will do, decided and checked before any worker starts."""

    chosen: tuple[Variant, ...]  # the variants, in order
    runs: tuple[Variant, ...]  # each once per core count
    inputs: Inputs
    epochs: Mapping[str, Optional[int]]  # variant name -> examples in one epoch (None: its chain tells)
    staged: tuple[tuple[str, Any, int], ...]  # (label, config, batch size) whose stages are measured
    cpus: Mapping[int, list]
    features: Any
    overrides: Mapping[str, Any]
    ablation: bool
    dataset_fn: str
    input_fns: tuple[str, ...]
    skipped: Mapping[str, str] = dataclasses.field(default_factory=dict)  # variant name -> why it cannot read the data


def run(data: Optional[Union[str, os.PathLike]] = None,
        variants: Optional[Sequence[Union[str, Variant]]] = None, *,
        dataset_fn: Optional[Union[str, Callable]] = None, input_fns: Sequence[Union[str, Callable]] = (),
        shards: Optional[Union[str, os.PathLike]] = None, ablation: bool = False, baseline: Optional[str] = None,
        features: Any = None, overrides: Optional[Mapping[str, Any]] = None,
        options: Optional[RunOptions] = None, progress: bool = True, **settings: Any) -> BenchResult:
    """Times input-pipeline variants side by side, each in its own process, in alternating rounds.

    Args:
      data: a folder with one subfolder per class (wav, images: any registered domain), CSV
        manifest or shard folder; needed by the tfpipe-built variants (not by dataset_fn /
        input_fn ones). Its domain decides the feature config variants and overrides edit; a
        shard folder's (as data or shards) stored config is where they start.
      variants: specs (see `parse_variant`) or Variant objects; the first is the baseline.
        Default: naive, optimized (none when only input_fns are given).
      dataset_fn: your own pipeline, `FUNCTION(pipeline: PipelineConfig, mode: str) ->
        tf.data.Dataset`, as a module-level function or its "MODULE:FUNCTION" /
        "FILE.py:FUNCTION" spec: each variant (and `ablation`) is the PipelineConfig handed to it.
      input_fns: plain Estimator input_fns (functions or specs) to A/B, each a variant named
        by its spec; called with only the arguments they name (params={"batch_size": ...}).
      shards: shard folder the `shards` variants read.
      ablation: add optimized and naive with each toggle flipped alone, and the other backend
        (where the data's config has one).
      baseline: the variant ratios compare to (ablation rows compare to their preset).
      features: the domain config the variants start from (AudioConfig for wavs, ImageConfig
        for images; default: a shard folder's stored one, else the domain's default).
      overrides: typed PipelineConfig and domain config field values applied to every variant.
      options: how to time (RunOptions); or pass its fields here as keywords (batches=2, repeats=3,
        cores=(1, 2), ops=True, ...).
      progress: show a progress line on stderr.

    Returns:
      BenchResult (`.table()`, `.to_json()`, `.plot(path)`).

    Raises:
      ValueError / DataError: bad variant specs, settings or data, by name (FunctionSpecError: a user
        function's spec names nothing).
      UserFunctionError: a user's function raised, naming it, the exception and the line.
      VariantError: a variant's chain failed in its worker, naming the variant.
    """
    options = _options(options, settings)
    plan = plan_run(data, variants, dataset_fn, input_fns, shards, ablation, baseline, features, overrides, options)
    common = {"data": plan.inputs.data, "shards": plan.inputs.shards, "sys_path": list(sys.path)}
    steps = len(plan.runs) * (1 + options.repeats) + bool(plan.staged) + len(_timed_ops(plan, options))
    with Session(plan.runs, common, plan.cpus, bool(plan.staged), steps, progress) as session:
        builds = session.build(options.warmup)
        plan = _skip(plan, session.skipped)  # a recipe that refused the data at build time
        timed = _timed_ops(plan, options)
        turn_batches = _turn_batches(plan, builds, options)
        turns = session.rounds(options.repeats, turn_batches, options.step_ms,
                               0.0 if options.batches else options.turn_seconds)
        reports = session.stages(plan.staged, options.stage_seconds)
        # The ceiling alone needs fewer counts than the op table: a third of the budget.
        op_reports = session.ops(timed, options.stage_seconds if options.ops else options.stage_seconds / 3)
        peaks = session.stop()
    first = session.ready[0]  # a worker's view
    machine = session_lib.machine(first["tf_version"], first["gpu"], first.get("gpu_names", ()))
    ceilings = {v.name: Ceiling.from_ops(r, v.name) for v, r in zip(timed, op_reports)} if options.ceiling else {}
    results = _results(plan, session.ready, builds, peaks, turns, reports, machine, options, ceilings)
    settings = _settings(plan, options, turn_batches, builds)
    wall = sum(session.phases.values())
    return BenchResult(settings, machine, tuple(results), tuple(reports), wall, session.phases,
                       tuple(op_reports) if options.ops else (), skipped=dict(plan.skipped))


def _timed_ops(plan: _Plan, options: RunOptions) -> tuple[Variant, ...]:
    """The variants whose ops are timed: all with `ops`; for the ceiling alone, all but --ablation's toggled rows."""
    if options.ops:
        return plan.chosen
    if not options.ceiling:
        return ()
    return tuple(v for v in plan.chosen if not plan.ablation or not v.changed)


def _options(options: Optional[RunOptions], settings: Mapping[str, Any]) -> RunOptions:
    """RunOptions from `options` and/or keyword fields (ValueError naming an unknown one)."""
    names = {f.name for f in dataclasses.fields(RunOptions)}
    unknown = sorted(set(settings) - names)
    if unknown:
        raise ValueError(f"run() got {', '.join(unknown)}: not RunOptions fields ({', '.join(sorted(names))})")
    settings = {k: v for k, v in settings.items() if k != "cores" or v is not None}
    return dataclasses.replace(options, **settings) if options else RunOptions(**settings)


def plan_run(data: Any, variants: Any, dataset_fn: Any, input_fns: Sequence[Any], shards: Any, ablation: bool,
          baseline: Optional[str], features: Any, overrides: Optional[Mapping[str, Any]],
          options: RunOptions) -> _Plan:
    """The run's variants and inputs, every check that can fail done before a worker starts."""
    cpus = {c: bench_worker.pin_cpus(c) for c in options.cores}  # ValueError: more than usable
    fn = user_fns.fn_spec(dataset_fn) if dataset_fn is not None else ""
    input_specs = tuple(user_fns.fn_spec(f) for f in input_fns)
    user_fns.check(fn, input_specs)
    if variants is None:
        variants = () if input_specs and not fn else DEFAULT_VARIANTS
    inputs = _inputs(data, shards)
    features = bench_domains.base_features(inputs, features, overrides)
    chosen = tuple(resolve_variants(variants, features, overrides, ablation, baseline, dataset_fn=fn,
                                    input_fns=input_specs))
    reads, skipped = {}, {}
    for v in chosen:
        try:
            reads[v.name] = v.reads(inputs)  # ValueError: the run lacks what it reads
        except ValueError as e:
            if not v.skippable:
                raise
            skipped[v.name] = str(e)
    chosen = _without(chosen, skipped)
    _check_files(chosen, inputs)
    epochs = {v.name: reads[v.name] and _check_size(v, *reads[v.name]) for v in chosen}
    readers = [v for v in chosen if v.reads_data]
    staged = bench_domains.stage_configs(inputs.domain, readers, MAX_STAGE_CONFIGS) \
        if options.stages and inputs.domain is not None else []
    return _Plan(chosen, tuple(with_cores(chosen, options.cores)), inputs, epochs, tuple(staged), cpus, features,
                 dict(overrides or {}), ablation, fn, input_specs, skipped)


def _without(chosen: Sequence[Variant], skipped: Mapping[str, str]) -> tuple[Variant, ...]:
    """`chosen` less the skipped variants; a skipped baseline's place goes to the first variant left.

    Raises:
      ValueError: no variant is left, with each one's reason.
    """
    kept = [v for v in chosen if v.name not in skipped]
    if not kept:
        raise ValueError("no variant can read the data: " + "; ".join(f"{n}: {r}" for n, r in skipped.items()))
    if not skipped:
        return tuple(chosen)
    old = next(v.name for v in chosen if v.reference == v.name)
    baseline = old if old not in skipped else kept[0].name
    return tuple(dataclasses.replace(v, reference=baseline if v.name == baseline or v.reference in skipped
                                     else v.reference) for v in kept)


def _skip(plan: _Plan, skipped: Mapping[str, str]) -> _Plan:
    """The plan without the variants skipped at build time (their runs at every core count)."""
    new = {k: r for k, r in skipped.items() if k not in plan.skipped}
    if not new:
        return plan
    chosen = _without(plan.chosen, new)
    runs = tuple(next(dataclasses.replace(v, cores=r.cores) for v in chosen if v.name == r.name)
                 for r in plan.runs if r.name not in new)
    return dataclasses.replace(plan, chosen=chosen, runs=runs, skipped={**plan.skipped, **new})


def _inputs(data: Any, shards: Any) -> Inputs:
    """The run's data and shard folder, found once; the domain is the data's, else the shard folder's."""
    from tfpipe.core import source as sources  # TensorFlow: here, not at import (`tfpipe bench --help`)
    from tfpipe.storage.source import ShardSource

    source = sources.find(data) if data is not None else None
    shard_source = sources.find(shards) if shards is not None else None
    if shard_source is not None and not isinstance(shard_source, ShardSource):
        raise ValueError(f"--shards {shards}: not a shard folder (no {sources.INDEX_NAME}); "
                         f"write one with `tfpipe prepare`")
    domain = bench_domains.of_source(source) if source is not None else None
    if source is None and shard_source is not None:
        domain = bench_domains.of_source(shard_source)
    from tfpipe.core.filesystem import abspath  # keeps a gs:// or s3:// path whole

    return Inputs(data and abspath(data), source, shards and abspath(shards), shard_source, domain)


def _check_size(v: Variant, where: str, examples: int) -> int:
    """Examples in one epoch of what `v` reads; ValueError when it holds less than one batch."""
    if examples < v.pipeline.batch_size:
        raise ValueError(f"variant {v.name!r}: {where} holds {examples} example(s), fewer than one batch "
                         f"(batch_size={v.pipeline.batch_size}): nothing to time; lower --batch_size (at most "
                         f"{examples // 20 or 1} gives 20 batches an epoch) or use more data")
    return examples


def _check_files(chosen: Sequence[Variant], inputs: Inputs) -> None:
    """Each file the data variants read, checked with each of their configs (DataError naming the variants)."""
    from tfpipe.core.files import FileSource

    if inputs.domain is None or not isinstance(inputs.source, FileSource):
        return
    readers = [v for v in chosen if v.reads_data]
    for config in dict.fromkeys(v.features for v in readers):
        try:
            inputs.domain.file_table(inputs.source.paths, config)
        except DataError as e:
            names = ", ".join(repr(v.name) for v in readers if v.features == config)
            raise DataError(f"variant {names}: {e}") from e


def _turn_batches(plan: _Plan, builds: Sequence[dict], options: RunOptions) -> dict[str, int]:
    """Batches per timed block of each variant: --batches, else one epoch (at most MAX_EPOCH_BATCHES).

    tfpipe's epoch is known from the data; a user's dataset reports its own once built (the
    first of its runs decides; USER_TURN_BATCHES if it cannot tell).
    """
    out = {}
    for v, build in zip(plan.runs, builds):
        if v.name not in out:
            out[v.name] = options.batches or min(MAX_EPOCH_BATCHES, _epoch_batches(plan, v, build) or USER_TURN_BATCHES)
    return out


def _epoch_batches(plan: _Plan, v: Variant, build: Mapping[str, Any]) -> Optional[int]:
    """Batches in one epoch of `v` (None: unknown)."""
    examples = plan.epochs.get(v.name)
    return max(1, examples // v.pipeline.batch_size) if examples else build.get("epoch_batches")


def _results(plan: _Plan, ready: Sequence[dict], builds: Sequence[dict], peaks: Sequence[dict],
             turns: Mapping[str, Sequence[Turn]], reports: Sequence[StageReport], machine: Mapping[str, Any],
             options: RunOptions, ceilings: Mapping[str, Ceiling]) -> list[VariantResult]:
    """One VariantResult per run: statistics, ratios, the limit of its own stages, notes."""
    keys = {(v.name, v.cores): v.key for v in plan.runs}
    stats = round_stats(turns, {v.key: keys[v.reference, v.cores] for v in plan.runs})
    baseline = next(v.name for v in plan.chosen if v.reference == v.name)
    to_baseline = round_stats(turns, {v.key: keys[baseline, v.cores] for v in plan.runs})
    first_count = plan.runs[0].cores
    to_first = round_stats(turns, {v.key: keys[v.name, first_count] for v in plan.runs}) if options.cores else {}
    results = []
    for v, info, build, peak in zip(plan.runs, ready, builds, peaks):
        report = next((r for (_, config, batch_size), r in zip(plan.staged, reports)
                       if v.reads_data and (v.features, v.pipeline.batch_size) == (config, batch_size)), None)
        ideal = report.ideal / report.cores * info["usable_cores"] if report else None  # for its own cores
        if ideal and options.step_ms:
            ideal = min(ideal, v.pipeline.batch_size * 1000.0 / options.step_ms)  # the step caps what input can use
        note = "; ".join(v.notes(plan.inputs, machine["gpu"]) + ["finite dataset: repeated"] * bool(build["repeated"]))
        results.append(VariantResult(v.name, v.kind, v.reference, v.config(), note, tuple(turns[v.key]),
                                     stats[v.key], build["first_batch_s"], info["import_rss_mb"],
                                     peak["peak_rss_mb"], ideal, to_baseline[v.key].ratio,
                                     cores=info["usable_cores"], pinned=v.cores is not None,
                                     speedup=to_first[v.key].ratio if options.cores else None,
                                     batch_spec=build.get("batch_spec", ""),
                                     padding_share=build.get("padding_share"),
                                     stage_label=report.label if report else "",
                                     ceiling=ceilings.get(v.name)))
    return results


def _settings(plan: _Plan, options: RunOptions, turn_batches: Mapping[str, int],
              builds: Sequence[dict]) -> dict[str, Any]:
    """What the run was asked and decided, for the table header and the JSON."""
    inputs, chosen = plan.inputs, plan.chosen
    source = inputs.source
    return {"data": inputs.data, "shards": inputs.shards, "domain": inputs.domain.name if inputs.domain else None,
            "num_examples": source.num_examples if source else None,
            "num_classes": len(source.class_names) if source else None, "variants": [v.name for v in chosen],
            "baseline": next(v.name for v in chosen if v.reference == v.name),
            "ablation": plan.ablation, "dataset_fn": plan.dataset_fn or None, "input_fns": list(plan.input_fns),
            "cores": list(options.cores) or None, "ops": options.ops, "ceiling": options.ceiling,
            "batches": options.batches,
            "turn_batches": dict(turn_batches),
            "epoch_batches": {v.name: _epoch_batches(plan, v, b) for v, b in zip(plan.runs, builds)},
            "turn_seconds": 0.0 if options.batches else options.turn_seconds, "repeats": options.repeats,
            "warmup": options.warmup, "settle_batches": bench_worker.SETTLE_BATCHES, "step_ms": options.step_ms,
            "batch_size": chosen[0].pipeline.batch_size, "stage_seconds": options.stage_seconds,
            "features": dataclasses.asdict(plan.features), "overrides": dict(plan.overrides), "frozen_while_idle": bench_worker.FREEZE}
