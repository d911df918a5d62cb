"""What `tfpipe bench` found, and how it is shown: statistics, aligned table, JSON (chart: bench.chart).

Everything here is pure (no TensorFlow, no processes), so the numbers a user reads
can be checked against hand-computed ones.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from typing import Any, Mapping, Optional, Sequence

from tfpipe.bench import advice, caveats, winner
from tfpipe.bench.text import align_table, plural, turn  # noqa: F401  (align_table: its old home)
from tfpipe.bench.ceiling import Ceiling
from tfpipe.bench.ops import OpsReport
from tfpipe.bench.stages import STAGE_NAMES, StageReport, added_ms  # noqa: F401  (their old home)

SCHEMA = "tfpipe-bench"
# 2: per-core rates, --cores (cores, pinned, speedup), --ops, user dataset_fn/input_fn.
# 3: stages of any domain: each stage report has label, features, batch_size and its own stage
#    names (was: backend, and the wav chain's names only); settings.domain; variants' batch_spec.
# 4: caveats (when the run may mislead) and each variant's within_noise; "ideal" is the limiting
#    stage's one-thread rate x cores (stages: limiting_rate, linear = the old whole-chain ideal,
#    batched, on_batches_ms_per_example, advice); variants' padding_share; ops' rewrites and
#    advice; rounds' ratios; settings.epoch_batches.
# 5: winner (who won per core count, ties named, a reference recipe that beat tfpipe); skipped (variants
#    that cannot read the data, with the reason); a row whose medians and per-round ratios disagree on
#    the direction is within_noise; each variant's ceiling (per-element ceiling, cores it can use);
#    settings.ceiling; machine.gpu_names.
SCHEMA_VERSION = 5


@dataclasses.dataclass(frozen=True)
class Turn:
    """One timed turn of one variant: `batches` batches after one untimed settle batch.

    Attributes:
      batches: batches timed.
      examples: examples in them.
      seconds: wall time of the turn, simulated steps included.
      wait_s: of that, time spent waiting for the next batch (input).
    """

    batches: int
    examples: int
    seconds: float
    wait_s: float

    @property
    def rate(self) -> float:
        """Examples per second in this turn."""
        return self.examples / self.seconds


@dataclasses.dataclass(frozen=True)
class RoundStats:
    """Examples/s of one variant over the rounds, and how it compares to its reference.

    Attributes:
      rates: examples/s in each round.
      median, min, max: of `rates`.
      ratio: median over rounds of (this rate / the reference's rate in the same round),
        so drift that slows a whole round cancels out.
      ratios: those per-round ratios.
    """

    rates: tuple[float, ...]
    median: float
    min: float
    max: float
    ratio: float
    ratios: tuple[float, ...] = ()


def round_stats(turns: Mapping[str, Sequence[Turn]], references: Mapping[str, str]) -> dict[str, RoundStats]:
    """Per-variant statistics from the turns of each round.

    Args:
      turns: variant name -> its turns, round by round (the same number for every variant).
      references: variant name -> the variant its ratio compares to (itself for the baseline).

    Returns:
      variant name -> RoundStats.
    """
    rates = {name: [t.rate for t in ts] for name, ts in turns.items()}
    out = {}
    for name, own in rates.items():
        ref = rates[references[name]]
        if len(ref) != len(own):
            raise ValueError(f"{name}: {len(own)} rounds but its reference {references[name]} has {len(ref)}")
        ratios = [a / b for a, b in zip(own, ref)]
        out[name] = RoundStats(tuple(own), statistics.median(own), min(own), max(own),
                               statistics.median(ratios), tuple(ratios))
    return out


@dataclasses.dataclass(frozen=True)
class VariantResult:
    """One variant's measurements.

    Attributes:
      name: the variant spec, e.g. "optimized:fuse_maps=false".
      kind: "pipeline", "shards", a recipe ("keras", "tf-models"), "dataset_fn" or "input_fn".
      reference: the variant `stats.ratio` compares to.
      config: {"pipeline": ..., "features": ...} as plain dicts (pipeline None for keras).
      note: e.g. why a toggle has no effect here.
      turns: the timed turns, round by round.
      stats: statistics over the turns.
      first_batch_s: build + first batch, seconds (not in the rates).
      import_rss_mb: resident memory after importing TensorFlow, before building.
      peak_rss_mb: peak resident memory of the variant's process.
      ideal: the limit of this variant's stages: the limiting stage's one-thread rate x its cores
        (None: not measured).
      baseline_ratio: median of per-round ratios to the run's baseline (= stats.ratio unless
        the reference is another variant, as for ablation rows).
      cores: cores its process could use (pinned count, or the usable cores).
      pinned: its process was pinned to `cores` (`--cores`).
      speedup: median of per-round ratios to the same variant at the run's first core count
        (None without `--cores`).
      batch_spec: dtypes and shapes of its first batch, e.g. "({'image': uint8[64, 64, 64, 3]}, int64[64])".
      padding_share: share of its first batches' values that are padding (None: no shape varies).
      stage_label: the label of the stage report its `ideal` comes from ("": none).
      ceiling: its per-element ceiling (bench.ceiling.Ceiling: the one-thread ops of its chain), or None.
    """

    name: str
    kind: str
    reference: str
    config: Mapping[str, Any]
    note: str
    turns: tuple[Turn, ...]
    stats: RoundStats
    first_batch_s: float
    import_rss_mb: float
    peak_rss_mb: float
    ideal: Optional[float]
    baseline_ratio: Optional[float] = None
    cores: Optional[int] = None
    pinned: bool = False
    speedup: Optional[float] = None
    batch_spec: str = ""
    padding_share: Optional[float] = None
    stage_label: str = ""
    ceiling: Optional[Ceiling] = None

    @property
    def key(self) -> str:
        """The name, plus "@cores" when pinned (unique within a run)."""
        return f"{self.name}@{self.cores}" if self.pinned else self.name

    @property
    def per_core(self) -> Optional[float]:
        """Median examples/s per core it could use."""
        return self.stats.median / self.cores if self.cores else None

    @property
    def share_of_ideal(self) -> Optional[float]:
        """Median examples/s as a share of the limit (None: no stages measured)."""
        return self.stats.median / self.ideal if self.ideal else None

    @property
    def wait_share(self) -> float:
        """Median share of turn time spent waiting on input."""
        return statistics.median(t.wait_s / t.seconds for t in self.turns)

    @property
    def ms_per_batch(self) -> float:
        """Median wall milliseconds per batch, simulated step included."""
        return statistics.median(1000.0 * t.seconds / t.batches for t in self.turns)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        s = self.stats
        return {"name": self.name, "kind": self.kind, "reference": self.reference, "note": self.note,
                "config": dict(self.config),
                "examples_per_s": {"median": s.median, "min": s.min, "max": s.max, "rounds": list(s.rates)},
                "ratio": s.ratio, "baseline_ratio": self.baseline_ratio, "cores": self.cores, "pinned": self.pinned,
                "examples_per_s_per_core": self.per_core, "speedup": self.speedup,
                "first_batch_s": self.first_batch_s, "batch_spec": self.batch_spec,
                "import_rss_mb": self.import_rss_mb, "peak_rss_mb": self.peak_rss_mb,
                "ms_per_batch": self.ms_per_batch, "input_wait_share": self.wait_share, "ideal": self.ideal,
                "share_of_ideal": self.share_of_ideal, "stage_label": self.stage_label,
                "padding_share": self.padding_share,
                "ceiling": self.ceiling.to_dict(s.median, self.cores) if self.ceiling else None,
                "turns": [dataclasses.asdict(t) for t in self.turns]}


@dataclasses.dataclass(frozen=True)
class BenchResult:
    """Everything `tfpipe.bench.run` measured.

    Attributes:
      settings: data, batches, repeats, warmup, step_ms, baseline, ... as given.
      machine: cores, usable cores, TF and Python versions, platform, GPU.
      variants: one result per variant, in the order run.
      stages: stage measurements per distinct feature config the variants use, at most
        two (empty if not measured).
      wall_s: wall time of the whole run.
      phases: seconds spent starting workers, building, in rounds, on stages, on ops, stopping.
      ops: per-op single-thread rates of each variant's final chain (empty without `ops`).
      skipped: variant name -> why it was not timed (a reference recipe that cannot read the data).
    """

    settings: Mapping[str, Any]
    machine: Mapping[str, Any]
    variants: tuple[VariantResult, ...]
    stages: tuple[StageReport, ...]
    wall_s: float
    phases: Mapping[str, float] = dataclasses.field(default_factory=dict)
    ops: tuple[OpsReport, ...] = ()
    skipped: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __getitem__(self, name: str) -> VariantResult:
        """The variant by key ("optimized@2") or name (its first core count)."""
        for v in self.variants:
            if name in (v.key, v.name):
                return v
        raise KeyError(f"no variant {name!r}; measured: {', '.join(v.key for v in self.variants)}")

    @property
    def caveats(self) -> list[str]:
        """Why this run may mislead (too few batches an epoch, rounds that disagree, ...), with what to do."""
        return caveats.caveats(self.settings, self.variants)

    @property
    def standings(self) -> list[winner.Standing]:
        """Who won, per core count: the fastest row, and whether the rounds agree it beat every other."""
        return winner.standings(self.variants)

    def within_noise(self, v: VariantResult) -> bool:
        """Whether `v` differs from its reference by less than the run's noise."""
        return caveats.row_within_noise(v, self.variants)

    def stage_advice(self, report: StageReport) -> list[str]:
        """What to do about a stage report's limit."""
        users = [v for v in self.variants if v.stage_label == report.label]
        return advice.stage_advice(report, self.settings.get("data"), users, shards=self.settings.get("shards"))

    def ops_advice(self, report: OpsReport) -> list[str]:
        """What the limiting op of a variant's chain means, given the rate the variant reached."""
        variant = next((v for v in self.variants if v.key == report.variant), None)
        return advice.ops_advice(report, variant and variant.stats.median, variant)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON: format, version, settings, machine, variants, stages, ops, winner, skipped, caveats,
        wall_s, phases_s."""
        return {"format": SCHEMA, "version": SCHEMA_VERSION, "settings": dict(self.settings),
                "machine": dict(self.machine),
                "variants": [{**v.to_dict(), "within_noise": self.within_noise(v)} for v in self.variants],
                "stages": [{**s.to_dict(), "advice": self.stage_advice(s)} for s in self.stages],
                "ops": [{**o.to_dict(), "advice": self.ops_advice(o)} for o in self.ops],
                "winner": [w.to_dict() for w in self.standings], "skipped": dict(self.skipped),
                "caveats": self.caveats, "wall_s": self.wall_s, "phases_s": dict(self.phases)}

    def to_json(self, indent: Optional[int] = 2) -> str:
        """The whole result as JSON text (see `to_dict` for the keys)."""
        return json.dumps(self.to_dict(), indent=indent)

    def table(self) -> str:
        """The aligned text table `tfpipe bench` prints."""
        return bench_table(self)

    def plot(self, path: str) -> None:
        """Writes the PNG bar chart to `path` (grouped by core count with `--cores`)."""
        from tfpipe.bench.chart import plot_bench

        plot_bench(self, path)


def _source(settings: Mapping[str, Any]) -> str:
    """What the variants read: "2000 examples in DIR", the dataset_fn, the input_fns."""
    parts = []
    if settings.get("num_examples") is not None:
        parts.append(f"{settings['num_examples']} examples in {settings['data']}")
    if settings.get("dataset_fn"):
        parts.append(f"dataset_fn {settings['dataset_fn']}")
    if settings.get("input_fns"):
        parts.append(f"input_fn {', '.join(settings['input_fns'])}")
    return "; ".join(parts) or "no data"


def bench_table(result: BenchResult) -> str:
    """Header, one row per variant (per core count with --cores), caveats, then the stage and op breakdowns."""
    s = result.settings
    lines = [_header(result)] + _rows(result)
    if s.get("cores"):
        lines.append("Each core count is its own process pinned to that many cores (sched_setaffinity); "
                     "\"vs reference\" compares within one core count.")
    if s["step_ms"] > 0:
        lines.append(f"With a {s['step_ms']:g} ms step, a chain without prefetch costs input + step per "
                     f"batch; with prefetch, max(input, step).")
    lines += [f"skipped {name}: {reason}" for name, reason in result.skipped.items()]
    lines += [w.text() for w in result.standings]
    lines += [f"caution: {c}" for c in result.caveats]
    lines += _ceiling_lines(result)
    for rep in result.stages:
        lines += [""] + rep.table_lines(bool(s.get("cores"))) + [f"  what to do: {a}" for a in result.stage_advice(rep)]
    for report in result.ops:
        lines += [""] + report.table_lines() + [f"  what to do: {a}" for a in result.ops_advice(report)]
    lines.append(f"\n({len(result.variants)} variants in {result.wall_s:.0f} s; each in its own process, "
                 f"timed in turns while the others are paused)")
    return "\n".join(lines)


def _ceiling_lines(result: BenchResult) -> list[str]:
    """The per-element ceilings: each chain's one-thread cost and how many cores it can use."""
    rows = [v for v in result.variants if v.ceiling is not None]
    if not rows:
        return []
    return (["", "per-element ceiling (the ops that run on one thread, timed alone; parallel maps scale with the "
                 "cores, these do not):"]
            + [f"  {v.ceiling.line(v.stats.median, v.cores, v.key)}" for v in rows])


def _header(result: BenchResult) -> str:
    """The table's first line: what was read, rounds, turns, TensorFlow, cores."""
    s, m = result.settings, result.machine
    return (f"tfpipe bench: {_source(s)}, {plural(s['repeats'], 'round')} x "
            f"{turn(s)} (after {s['warmup']} warm-up), TF {m['tf_version']}, {m['usable_cores']} usable cores"
            + (f", each variant pinned to {', '.join(map(str, s['cores']))} cores in turn" if s.get("cores") else "")
            + (f", simulated step {s['step_ms']:g} ms/batch" if s["step_ms"] > 0 else ""))


def _rows(result: BenchResult) -> list[str]:
    """One aligned row per variant; a ratio within the run's noise is marked "~"."""
    s = result.settings
    step, pinned = s["step_ms"] > 0, bool(s.get("cores"))
    padded = any(v.padding_share is not None for v in result.variants)
    head = ["variant"] + ["cores"] * pinned + ["examples/s", "per core", "min-max", "vs reference"]
    head += [f"vs {plural(s['cores'][0], 'core')}"] if pinned else []
    head += ["first batch", "peak RSS", "% limit"] + ["padding"] * padded + ["ms/batch", "input wait"] * step
    rows = [head + ["note"]]
    for v in result.variants:
        st = v.stats
        ratio = "-" if v.reference == v.name else f"{st.ratio:.2f}x {v.reference}" + " ~" * result.within_noise(v)
        row = [v.name] + [str(v.cores)] * pinned
        row += [f"{st.median:,.0f}", "-" if v.per_core is None else f"{v.per_core:,.0f}",
                f"{st.min:,.0f}-{st.max:,.0f}", ratio]
        row += [f"{v.speedup:.2f}x" if v.speedup is not None else "-"] * pinned
        row += [f"{v.first_batch_s:.2f} s", f"{v.peak_rss_mb:,.0f} MB",
                "-" if v.share_of_ideal is None else f"{v.share_of_ideal:.0%}"]
        row += ["-" if v.padding_share is None else f"{v.padding_share:.0%}"] * padded
        row += [f"{v.ms_per_batch:.1f}", f"{v.wait_share:.0%}"] if step else []
        rows.append(row + [v.note])
    return align_table(rows, right=range(1, len(head)))  # name left, numbers right, note left
