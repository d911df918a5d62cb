"""What to do about what limits a chain: the bench names the limiting stage or op, this says why and how.

Keyed by stage name (the domains' stage names: read, decode, features, scale; a shard folder's
records and cast; the chain's list and batch), and for `--ops` by what the limiting op is and
the tf.data rewrites its chain's options leave on. Pure: text from the reports' numbers.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

_BELOW_LIMIT = 0.5  # a variant under this share of its limit loses time outside the stages

# What to do when a stage limits the chain ({data}: the data it reads).
_STAGE_ADVICE = {
    "list": "listing the files costs the most per example: the chain does little else per example; see --ops",
    "read": "reading the files limits it (many small files or a slow disk): `tfpipe prepare --input {data} "
            "--output SHARDS` stores them as a few large shards read in parallel (parallel_reads), or "
            "cache='memory' keeps the bytes in RAM if they fit",
    "decode": "decoding every example in every epoch limits it: `tfpipe prepare --input {data} --output SHARDS` "
              "decodes once and stores what the chain needs (images resized to the size the crops need, or "
              "--store raw: pixels with nothing left to decode; wavs as features); time it with --shards SHARDS "
              "--variants optimized,shards",
    "features": "computing the features limits it: vectorize=true runs them on whole batches, and `tfpipe "
                "prepare --input {data} --output SHARDS` computes them once for every epoch",
    "scale": "converting the pixels to float32 limits it: dtype=uint8 hands over uint8 batches (a quarter of the "
             "bytes; cast on the accelerator)",
    "records": "reading and parsing the records limits it: v2 block shards (tfpipe prepare's default) parse a "
               "block of examples per record, and parallel_reads reads several shards at once",
    "cast": "the float16 -> float32 cast of the stored features is the largest stage, yet each example costs "
            "little: what bounds this chain is tf.data's per-example steps (un-blocking, the shuffle, the batch "
            "copy), each on one thread, which do not scale with the cores as the limit assumes; "
            "shuffle_blocks=true keeps examples in whole blocks, and --ops times each op",
    "batch": "copying examples into batches costs the most: each example costs little, and a batch is copied "
             "on one thread; larger examples per element (blocks) or --ops show where the rest goes",
}


# The same, where the run already reads shards `tfpipe prepare` wrote ({shards}): no advice to write them again.
_PREPARED_ADVICE = {
    "read": "reading the files limits it (many small files or a slow disk): the shards variants read the same "
            "examples from {shards} as a few large shards (compare their rows), or cache='memory' keeps the bytes "
            "in RAM if they fit",
    "decode": "decoding every example in every epoch limits it: the shards variants read {shards}, which "
              "`tfpipe prepare` wrote (compare their rows); shards that store encoded images are decoded every "
              "epoch too, where raw pixels (prepare --store raw) are not",
    "features": "computing the features limits it: the shards variants read them computed once from {shards} "
                "(compare their rows)",
}


# The same, where --data itself is a folder of records (shards `tfpipe prepare` wrote, or TFRecords).
_RECORDS_ADVICE = {
    "decode": "decoding every example in every epoch limits it: {data} holds encoded examples, decoded again each "
              "epoch; prepared from the original files with `--store raw` (nothing left to decode) or a smaller "
              "--max_side (a cheaper decode), the shards cost less per example",
    "features": "computing the features limits it: {data} holds what the features are computed from, each epoch; "
                "prepared from the original files with a --store that keeps the features, they are computed once",
}


def stage_advice(report: Any, data: Optional[str], variants: Sequence[Any] = (), *,
                 shards: Optional[str] = None) -> list[str]:
    """What to do about a stage report's limiting stage, and about variants far below its limit.

    Advice respects what the run already did: with a shard folder (`shards`) it points at the
    shards rows instead of `tfpipe prepare`, on data that is records already it says how else to
    prepare them, and it names no toggle every tfpipe variant has on.

    Args:
      report: a StageReport.
      data: the data folder the stages read (for the commands).
      variants: the VariantResults whose limit this report is.
      shards: the run's --shards folder (None: none).
    """
    stages = report.limiting.split(" + ")
    records = "records" in (getattr(report, "names", None) or ())
    table = {**_STAGE_ADVICE, **(_RECORDS_ADVICE if records else {}), **(_PREPARED_ADVICE if shards else {})}
    key = next((s for s in reversed(stages) if s in table), None)
    text = table[key] if key else f"{report.limiting} limits it: --ops times each op of the chain"
    if key == "features" and not shards and not records and _all_on(variants, "vectorize"):
        text = ("computing the features limits it, already on whole batches (vectorize is on): `tfpipe prepare "
                "--input {data} --output SHARDS` computes them once for every epoch")
    out = [text.format(data=data or "DATA", shards=shards)]
    below = {v.key: v.share_of_ideal for v in variants
             if v.share_of_ideal is not None and v.share_of_ideal < _BELOW_LIMIT and v.kind == "pipeline"
             and (v.config.get("pipeline") or {}).get("parallel_map")}  # a sequential chain is far below anyway
    if below:
        low, high = min(below.values()), max(below.values())
        share = f"{low:.0%}" if f"{low:.0%}" == f"{high:.0%}" else f"{low:.0%}-{high:.0%}"
        out.append(f"{', '.join(below)} reach{'es' * (len(below) == 1)} {share} of the limit: the rest goes to "
                   f"work outside the stages (tf.data's per-example steps, which run on one thread each); "
                   f"--ops names the op")
    return out


def _all_on(variants: Sequence[Any], toggle: str) -> bool:
    """Every tfpipe-chain variant among `variants` has `toggle` on (and there is one)."""
    configs = [v.config.get("pipeline") or {} for v in variants if v.kind in ("pipeline", "shards")]
    return bool(configs) and all(c.get(toggle) for c in configs)


def ops_advice(report: Any, measured: Optional[float], variant: Any = None) -> list[str]:
    """What the limiting op of an OpsReport means, given the rate its chain reached (examples/s).

    Args:
      report: the OpsReport.
      measured: the rate the variant's chain reached, examples/s (None: unknown).
      variant: its VariantResult: for tfpipe's own chains the advice names the toggle, not tf.data's argument.
    """
    i = report.limiting
    op, capacity, label = report.ops[i], report.capacities[i], report.label(i)
    beats = measured is not None and measured > capacity * 1.05
    threads = f"{op.parallelism} threads" if op.parallel else "one thread"
    reached = f"the chain made {measured:,.0f}/s, above the {capacity:,.0f}/s {label} allows on {threads}" \
        if beats else ""
    if not op.parallel and "Map" in op.op and "map_parallelization" in report.rewrites:
        return [f"{label} is sequential as written, but tf.data's map_parallelization rewrite is on in this "
                f"chain's options (TensorFlow's default), so it runs in parallel when iterated"
                + (f": {reached}" if beats else "")
                + "; pass num_parallel_calls=tf.data.AUTOTUNE to say so, or set "
                  "options.experimental_optimization.map_parallelization = False to time it as written"]
    if beats:
        rewrites = ", ".join(report.rewrites) or "none of them on here"
        return [f"{reached}: its one-thread timing ran slower than the chain did (a busy machine), or tf.data's "
                f"rewrites ({rewrites}) or the op's own threads did its work faster than timed alone"]
    if op.parallel:
        return [f"{label} already runs on {op.parallelism} threads: fewer ms per example in it (or more cores) "
                f"is what helps"]
    pipeline = variant.config.get("pipeline") if variant is not None and variant.kind in _TFPIPE_KINDS else None
    if pipeline:
        return [_tfpipe_op_advice(label, "Map" in op.op, variant.name, pipeline)]
    return [f"{label} runs on one thread: give it num_parallel_calls=tf.data.AUTOTUNE if it is a map, or "
            f"move its work into one"]


# Variant kinds whose chain tfpipe's toggles build (a dataset_fn gets them too): advice names the toggle.
_TFPIPE_KINDS = ("pipeline", "shards", "dataset_fn")
# Toggles that take per-example steps off a chain: onto files (shuffle), into one map (fuse) or onto batches.
_PER_EXAMPLE_TOGGLES = ("fuse_maps", "shuffle_filenames", "vectorize")


def _tfpipe_op_advice(label: str, is_map: bool, name: str, pipeline: dict) -> str:
    """A sequential op in a chain tfpipe's toggles built: the toggle (flag, variant spec) that changes it."""
    spec = f"{name},{{}}" if ":" in name else f"{name}:{{}}"
    if is_map and not pipeline.get("parallel_map", True):
        return (f"{label} runs on one thread because {name} has parallel_map=false (the naive preset's): "
                f"parallel_map=true runs its maps with AUTOTUNE (flag --parallel_map, variant "
                f"{spec.format('parallel_map=true')})")
    off = [t for t in _PER_EXAMPLE_TOGGLES if pipeline.get(t) is False]
    if off:
        return (f"{label} runs on one thread, once per example: {', '.join(off)} {'is' if len(off) == 1 else 'are'} "
                f"off in {name}; {' / '.join(f'{t}=true' for t in off)} takes per-example steps off the chain "
                f"(variant {spec.format(','.join(f'{t}=true' for t in off))})")
    return (f"{label} runs on one thread, once per example, with every per-example toggle already on: fewer ms per "
            f"example in it (a faster core) is what helps, not more cores")
