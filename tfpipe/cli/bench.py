"""`tfpipe bench`: time pipeline variants side by side (engine: tfpipe.bench)."""

from __future__ import annotations

import sys
from typing import Sequence

from absl import flags

from tfpipe.cli import fail

FLAGS = flags.FLAGS


# --- bench -----------------------------------------------------------------------

_BENCH_CORPUS_PER_CLASS = 250  # x 8 synthetic classes = 2000 clips when --data is not given


def define_bench() -> None:
    from tfpipe import flags as tfpipe_flags
    from tfpipe.config import PipelineConfig
    from tfpipe.domains.audio.config import AudioConfig
    from tfpipe.domains.image.config import ImageConfig

    flags.DEFINE_string("data", None, "Folder with one subfolder per class (wav files or JPEG/PNG images), CSV "
                        "manifest or shard folder; the files' domain decides which feature fields apply "
                        "(AudioConfig for wavs, ImageConfig for images). "
                        "Unset: a temporary synthetic corpus of 2000 one-second clips.")
    flags.DEFINE_string("shards", None, "Shard folder the `shards` variants read (write one with tfpipe prepare).")
    flags.DEFINE_string("dataset_fn", None, "Time your own pipeline: MODULE:FUNCTION or FILE.py:FUNCTION, where "
                        "FUNCTION(pipeline: PipelineConfig, mode: str) returns a tf.data.Dataset. Each variant "
                        "(optimized, naive, optimized:fuse_maps=false, ...; --ablation) is the PipelineConfig "
                        "handed to it, so the toggles apply to your chain. No --data needed.")
    flags.DEFINE_list("input_fn", [], "A/B plain Estimator input_fns tfpipe did not build: MODULE:FN,FILE.py:FN2. "
                      "Each is a variant named by its spec, called with the arguments it names (params="
                      "{'batch_size': --batch_size}, mode='train') and must return a tf.data.Dataset. Alone, "
                      "only the input_fns run; with --variants or --dataset_fn, alongside those.")
    flags.DEFINE_boolean("ops", False, "Also time each dataset op of every variant's final chain on one thread "
                         "(shown by op type and the name given with name=) and name the op that limits it.")
    flags.DEFINE_list("cores", [], "Run every variant once per core count, its process pinned to that many cores "
                      "(taskset-style), e.g. --cores 1,2: rows per (variant, cores), per-core rates and the "
                      "speed-up over the first count, in the table, JSON and chart.")
    flags.DEFINE_string("variants", "naive,optimized",
                        "Comma-separated variants; the first is the baseline. Names: optimized, naive (the "
                        "presets), keras (the recipe a Keras user writes: audio_dataset_from_directory + the "
                        "same log-mel map, or image_dataset_from_directory + the same augmentation, + "
                        "prefetch), shards (the --shards folder; shards:naive for the naive chain). Each may "
                        "add PipelineConfig fields and the data's feature config fields: "
                        "NAME:field=value,field=value, e.g. optimized:fuse_maps=false, naive:backend=librosa, "
                        "optimized:batch_size=32,n_mels=40 (wavs), optimized:dtype=uint8,height=96 (images). "
                        "The field flags below (--batch_size, --n_mels, --height, --noprefetch, ...) apply to "
                        "every variant first.")
    flags.DEFINE_string("baseline", None, "Variant the ratios compare to (default: the first).")
    flags.DEFINE_boolean("ablation", False, "Also time optimized with each toggle flipped to naive alone, naive "
                         "with each switched on alone, and each with the other feature backend.")
    flags.DEFINE_float("step_ms", 0.0, "Simulated accelerator step per batch, in ms of sleep: shows how much "
                       "of the step the input hides (prefetch: max(input, step) instead of input + step).",
                       lower_bound=0.0)
    flags.DEFINE_integer("batches", None, "Batches timed per variant per round (default: whole epochs of at most "
                         "50 batches, for --turn_seconds).", lower_bound=1)
    flags.DEFINE_float("turn_seconds", 1.0, "Without --batches, each turn repeats its epoch until it has lasted "
                       "this long, so fast variants are timed in steady state.", lower_bound=0.0)
    flags.DEFINE_integer("repeats", 5, "Rounds; every variant takes one turn per round (--prepare: runs per "
                         "worker count).", lower_bound=1)
    flags.DEFINE_integer("warmup", 3, "Untimed batches after the first one.", lower_bound=0)
    flags.DEFINE_boolean("stages", True, "Measure the single-thread rate of each stage of the data's domain "
                         "(wav: read, decode, features; images: read, decode, scale), the limiting stage and the "
                         "ideal, once per distinct feature config among the variants (at most 2).")
    flags.DEFINE_float("stage_seconds", 0.5, "Time budget of each stage measurement.", lower_bound=0.05)
    flags.DEFINE_string("json", None, "Write every number, config and machine fact to this JSON file.")
    flags.DEFINE_string("plot", None, "Write a PNG bar chart (examples/s per variant, min-max, ideal; grouped by "
                        "core count with --cores) here.")
    flags.DEFINE_boolean("progress", True, "Show a progress line on stderr.")
    flags.DEFINE_boolean("prepare", False, "Instead of pipelines, time tfpipe.write_shards for each --workers count.")
    flags.DEFINE_list("workers", ["1", "2"], "--prepare: worker counts to compare, first = reference.")
    flags.DEFINE_integer("num_shards", 8, "--prepare: shards written per run.", lower_bound=1)
    flags.DEFINE_enum("store", "log_mel", ["log_mel", "waveform"], "--prepare: what the shards store.")
    # Field flags set a common base for every variant; a variant's own :field=value wins. Each
    # domain config's flags are defined (their names do not clash); the data's domain uses its own.
    for config in (PipelineConfig, AudioConfig, ImageConfig):
        tfpipe_flags.define_config_flags(config, FLAGS)


def run_bench(argv: Sequence[str]) -> None:
    import contextlib
    import tempfile

    from tfpipe import bench
    from tfpipe import flags as tfpipe_flags
    from tfpipe.config import PipelineConfig
    from tfpipe.domains.audio.config import AudioConfig
    from tfpipe.domains.image.config import ImageConfig
    from tfpipe.errors import DataError

    if argv:
        fail(f"unexpected arguments {' '.join(argv)}; pass --data DIR --variants naive,optimized")
    if FLAGS.prepare and FLAGS.plot:  # checked before any work is done
        fail("--plot draws pipeline variants; --prepare has only its table and --json")
    if FLAGS.prepare and not all(w.isdigit() for w in FLAGS.workers):
        fail(f"--workers={','.join(FLAGS.workers)}: expected worker counts, e.g. --workers 1,2")
    if not all(c.isdigit() and int(c) > 0 for c in FLAGS.cores):
        fail(f"--cores={','.join(FLAGS.cores)}: expected core counts >= 1, e.g. --cores 1,2")
    if FLAGS.prepare and (FLAGS.dataset_fn or FLAGS.input_fn or FLAGS.ops or FLAGS.cores):
        fail("--prepare times write_shards; --dataset_fn, --input_fn, --ops and --cores time pipelines")
    # A user's own pipeline needs no --data: tfpipe's chains run only when asked for.
    variants = (bench.split_variants(FLAGS.variants)
                if FLAGS.dataset_fn or not FLAGS.input_fn or FLAGS["variants"].present else [])
    needs_data = FLAGS.prepare or (not FLAGS.dataset_fn and bool(variants))
    # Every set field flag of every config; the engine refuses those the data's domain lacks.
    overrides = {k: v for config in (PipelineConfig, AudioConfig, ImageConfig)
                 for k, v in tfpipe_flags.set_fields(config).items()}
    try:
        features = tfpipe_flags.feature_config()
        with contextlib.ExitStack() as stack:
            data = FLAGS.data
            if data is None and needs_data:
                from tfpipe.domains.audio import synthetic

                data = stack.enter_context(tempfile.TemporaryDirectory(prefix="tfpipe-bench-corpus-"))
                print(f"no --data: writing a temporary synthetic corpus ({_BENCH_CORPUS_PER_CLASS} clips x "
                      f"{len(synthetic.CLASS_NAMES)} classes) to {data}", file=sys.stderr)
                synthetic.write_corpus(data, per_class=_BENCH_CORPUS_PER_CLASS, sample_rate=features.sample_rate,
                                       clip_seconds=features.clip_seconds, progress=FLAGS.progress)
            if FLAGS.prepare:
                result = bench.run_prepare(data, [int(w) for w in FLAGS.workers], repeats=FLAGS.repeats,
                                           num_shards=FLAGS.num_shards, features=features, store=FLAGS.store,
                                           progress=FLAGS.progress)
            else:
                result = bench.run(data, variants, dataset_fn=FLAGS.dataset_fn, input_fns=FLAGS.input_fn,
                                   cores=[int(c) for c in FLAGS.cores] or None, ops=FLAGS.ops,
                                   shards=FLAGS.shards, stages=FLAGS.stages,
                                   ablation=FLAGS.ablation, baseline=FLAGS.baseline, step_ms=FLAGS.step_ms,
                                   batches=FLAGS.batches, turn_seconds=FLAGS.turn_seconds,
                                   repeats=FLAGS.repeats, warmup=FLAGS.warmup, overrides=overrides,
                                   stage_seconds=FLAGS.stage_seconds, progress=FLAGS.progress)
    except (DataError, ValueError) as e:
        fail(str(e))
    print(result.table())
    if FLAGS.json:
        with open(FLAGS.json, "w") as f:
            f.write(result.to_json() + "\n")
        print(f"wrote {FLAGS.json}")
    if FLAGS.plot:
        result.plot(FLAGS.plot)
        print(f"wrote {FLAGS.plot}")


