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


def stage_advice(report: Any, data: Optional[str], variants: Sequence[Any] = ()) -> list[str]:
    """What to do about a stage report's limiting stage, and about variants far below its limit.

    Args:
      report: a StageReport.
      data: the data folder the stages read (for the commands).
      variants: the VariantResults whose limit this report is.
    """
    stages = report.limiting.split(" + ")
    text = next((_STAGE_ADVICE[s] for s in reversed(stages) if s in _STAGE_ADVICE),
                f"{report.limiting} limits it: --ops times each op of the chain")
    out = [text.format(data=data or "DATA")]
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


def ops_advice(report: Any, measured: Optional[float]) -> list[str]:
    """What the limiting op of an OpsReport means, given the rate its chain reached (examples/s)."""
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
    return [f"{label} runs on one thread: give it num_parallel_calls=tf.data.AUTOTUNE if it is a map, or "
            f"move its work into one"]
