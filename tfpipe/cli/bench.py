"""`tfpipe bench`: time pipeline variants side by side (engine: tfpipe.bench)."""

from __future__ import annotations

import sys
from typing import Sequence

from absl import flags

from tfpipe.cli import data_domain, fail, output_file, usage_error

FLAGS = flags.FLAGS

USAGE = {"bench": "usage: tfpipe bench [--data DIR] [--variants naive,optimized,...] [--dataset_fn F.py:FN] "
                  "[--input_fn F.py:FN,...] [flags]"}


# --- bench -----------------------------------------------------------------------

_BENCH_CORPUS_PER_CLASS = 250  # x 8 synthetic classes = 2000 clips when --data is not given


def define_bench() -> None:
    from tfpipe import flags as tfpipe_flags
    from tfpipe.bench.engine import RunOptions
    from tfpipe.bench.recipes import RECIPES
    from tfpipe.config import PipelineConfig
    from tfpipe.core import registry

    domains = registry.domains().values()
    default = registry.default_domain()
    flags.DEFINE_string("data", None, f"Folder with one subfolder per class of a domain's files "
                        f"({registry.known_extensions()}), CSV manifest or shard folder; the files' domain decides "
                        f"which feature fields apply (its config's: "
                        f"{', '.join(f'{d.config_class.__name__} for {d.name}' for d in domains)}). "
                        f"Unset: a temporary synthetic {default.name} corpus ({_BENCH_CORPUS_PER_CLASS} files per "
                        f"class).")
    flags.DEFINE_string("shards", None, "Shard folder the `shards` variants read (write one with tfpipe prepare).")
    flags.DEFINE_string("dataset_fn", None, "Time your own pipeline: MODULE:FUNCTION or FILE.py:FUNCTION, where "
                        "FUNCTION(pipeline: PipelineConfig, mode: str) returns a tf.data.Dataset. Each variant "
                        "(optimized, naive, optimized:fuse_maps=false, ...; --ablation) is the PipelineConfig "
                        "handed to it, so the toggles apply to your chain. No --data needed.")
    flags.DEFINE_list("input_fn", [], "A/B plain Estimator input_fns tfpipe did not build: MODULE:FN,FILE.py:FN2. "
                      "Each is a variant named by its spec, called with the arguments it names (params="
                      "{'batch_size': --batch_size}, mode='train') and must return a tf.data.Dataset. Alone, "
                      "only the input_fns run; with --variants or --dataset_fn, alongside those.")
    flags.DEFINE_list("cores", [], "Run every variant once per core count, its process pinned to that many cores "
                      "(taskset-style), e.g. --cores 1,2: rows per (variant, cores), per-core rates and the "
                      "speed-up over the first count, in the table, JSON and chart.")
    recipes = "; ".join(f"{name} ({RECIPES[name].title}: {', '.join(d.name for d in domains if name in d.recipes)})"
                        for name in RECIPES if any(name in d.recipes for d in domains))
    flags.DEFINE_string("variants", "naive,optimized",
                        "Comma-separated variants; the first is the baseline. Names: optimized, naive (the "
                        "presets), shards (the --shards folder; shards:naive for the naive chain), and the "
                        f"reference recipes the data's domain offers, written as their users write them: {recipes}. "
                        "Each may add PipelineConfig fields and the data's feature config fields: "
                        "NAME:field=value,field=value, e.g. optimized:fuse_maps=false, naive:backend=librosa, "
                        "optimized:batch_size=32,n_mels=40, optimized:dtype=uint8,height=96. "
                        "The field flags below (--batch_size, --noprefetch, a domain config's fields, ...) apply "
                        "to every variant first.")
    flags.DEFINE_string("baseline", None, "Variant the ratios compare to (default: the first).")
    flags.DEFINE_boolean("ablation", False, "Also time optimized with each toggle flipped to naive alone, naive "
                         "with each switched on alone, and each with the other feature backend.")
    flags.DEFINE_string("json", None, "Write every number, config and machine fact to this JSON file.")
    flags.DEFINE_string("plot", None, "Write a PNG bar chart (examples/s per variant, min-max, ideal; grouped by "
                        "core count with --cores) here.")
    flags.DEFINE_boolean("progress", True, "Show a progress line on stderr.")
    flags.DEFINE_string("write_flagfile", None, "Write the fastest tfpipe variant's PipelineConfig and the data's "
                        "feature config here as absl flags (--flag=value a line, the machine and date in a comment), "
                        "for `python -m estimator_demo --flagfile=F` or any program with tfpipe's flags.")
    flags.DEFINE_boolean("plan", False, "Print each variant's plan (the chain it would time: one line per step, its "
                         "arguments and why it is there; tfpipe.describe) and exit without timing.")
    flags.DEFINE_boolean("prepare", False, "Instead of pipelines, time tfpipe.write_shards for each --workers count.")
    flags.DEFINE_list("workers", ["1", "2"], "--prepare: worker counts to compare, first = reference.")
    flags.DEFINE_integer("num_shards", 8, "--prepare: shards written per run.", lower_bound=1)
    flags.DEFINE_enum("store", None, list(dict.fromkeys(s for d in domains for s in d.stores())),
                      "--prepare: what the shards store (default: the data's domain's first: "
                      + "; ".join(f"{d.name} {d.stores()[0]}" for d in domains) + ").")
    # Field flags set a common base for every variant; a variant's own :field=value wins. Every
    # domain config's flags are defined (a name two share is one flag); the data's domain uses its own.
    for config in (PipelineConfig, *tfpipe_flags.domain_configs()):
        tfpipe_flags.define_config_flags(config, FLAGS)
    tfpipe_flags.define_config_flags(RunOptions, FLAGS, exclude=("cores",))  # --cores: the list flag above


def run_bench(argv: Sequence[str]) -> None:
    from tfpipe.bench import FunctionSpecError, UserFunctionError, VariantError
    from tfpipe.errors import DataError

    _check_command_line(argv)
    try:
        result = _measure()
        if isinstance(result, str):  # --plan
            print(result)
            return
    except FunctionSpecError as e:  # the command line names a function that is not there: usage
        usage_error(str(e))
    except (DataError, ValueError, UserFunctionError, VariantError) as e:
        fail(str(e))
    print(result.table())
    if FLAGS.json:
        with open(output_file(FLAGS.json), "w") as f:
            f.write(result.to_json() + "\n")
        print(f"wrote {FLAGS.json}")
    if FLAGS.plot:
        result.plot(output_file(FLAGS.plot))
        print(f"wrote {FLAGS.plot}")
    if FLAGS.write_flagfile:
        _write_flagfile(result, output_file(FLAGS.write_flagfile))


def _write_flagfile(result, path: str) -> None:
    """--write_flagfile: the best tfpipe variant as absl flags."""
    from tfpipe.bench.flagfile import write_flagfile

    try:
        best = write_flagfile(result, path)
    except (OSError, ValueError) as e:
        fail(str(e))
    print(f"wrote {path} ({best.key}; train with it: python -m estimator_demo --flagfile={path})")


def _check_command_line(argv: Sequence[str]) -> None:
    """Flag combinations that cannot work: one line and exit 2, before any work is done."""
    if argv:
        usage_error(f"unexpected arguments {' '.join(argv)}; pass --data DIR --variants naive,optimized")
    if FLAGS.plan and (FLAGS.prepare or FLAGS.json or FLAGS.plot or FLAGS.write_flagfile):
        usage_error("--plan prints each variant's chain and times nothing: drop --prepare, --json, --plot and "
                    "--write_flagfile, or drop --plan")
    if FLAGS.prepare and FLAGS.plot:
        usage_error("--plot draws pipeline variants; --prepare has only its table and --json")
    if FLAGS.prepare and not all(w.isdigit() for w in FLAGS.workers):
        usage_error(f"--workers={','.join(FLAGS.workers)}: expected worker counts, e.g. --workers 1,2")
    if not all(c.isdigit() and int(c) > 0 for c in FLAGS.cores):
        usage_error(f"--cores={','.join(FLAGS.cores)}: expected core counts >= 1, e.g. --cores 1,2")
    if FLAGS.prepare and FLAGS.write_flagfile:
        usage_error("--write_flagfile writes the fastest pipeline variant; --prepare times write_shards")
    if FLAGS.prepare and (FLAGS.dataset_fn or FLAGS.input_fn or FLAGS.ops or FLAGS.cores):
        usage_error("--prepare times write_shards; --dataset_fn, --input_fn, --ops and --cores time pipelines")


def _measure():
    """The bench (or --prepare, or --plan's text) the flags ask for, over --data or a temporary synthetic corpus."""
    import contextlib
    import tempfile

    from tfpipe import bench
    from tfpipe import flags as tfpipe_flags
    from tfpipe.bench.engine import RunOptions
    from tfpipe.config import PipelineConfig

    # A user's own pipeline needs no --data: tfpipe's chains run only when asked for.
    variants = (bench.split_variants(FLAGS.variants)
                if FLAGS.dataset_fn or not FLAGS.input_fn or FLAGS["variants"].present else [])
    needs_data = FLAGS.prepare or (not FLAGS.dataset_fn and bool(variants))
    # Every set field flag of every config; the engine refuses those the data's domain lacks.
    overrides = {k: v for config in (PipelineConfig, *tfpipe_flags.domain_configs())
                 for k, v in tfpipe_flags.set_fields(config).items()}
    options = RunOptions(**tfpipe_flags.set_fields(RunOptions, exclude=("cores",)),
                         cores=tuple(int(c) for c in FLAGS.cores))
    with contextlib.ExitStack() as stack:
        data = FLAGS.data
        if data is None and needs_data:
            data = stack.enter_context(tempfile.TemporaryDirectory(prefix="tfpipe-bench-corpus-"))
            _synthetic_corpus(data)
        if FLAGS.prepare:
            domain = data_domain(data)
            return bench.run_prepare(data, [int(w) for w in FLAGS.workers], repeats=options.repeats,
                                     num_shards=FLAGS.num_shards,
                                     features=tfpipe_flags.feature_config(config_class=domain.config_class),
                                     store=FLAGS.store or domain.stores()[0], progress=FLAGS.progress)
        if FLAGS.plan:
            return bench.describe_variants(data, variants, dataset_fn=FLAGS.dataset_fn, input_fns=FLAGS.input_fn,
                                           shards=FLAGS.shards, ablation=FLAGS.ablation, baseline=FLAGS.baseline,
                                           overrides=overrides)
        return bench.run(data, variants, dataset_fn=FLAGS.dataset_fn, input_fns=FLAGS.input_fn, shards=FLAGS.shards,
                         ablation=FLAGS.ablation, baseline=FLAGS.baseline, overrides=overrides, options=options,
                         progress=FLAGS.progress)


def _synthetic_corpus(folder: str) -> None:
    """Writes the default domain's corpus (2000 files, as the domain config flags ask) when --data is not given."""
    from tfpipe import flags as tfpipe_flags
    from tfpipe.core.registry import default_domain

    domain = default_domain()
    if domain.corpus is None:
        raise ValueError(f"no --data, and the {domain.name} domain has no synthetic corpus to bench on: pass --data")
    print(f"no --data: writing a temporary synthetic {domain.name} corpus ({_BENCH_CORPUS_PER_CLASS} files per "
          f"class) to {folder}", file=sys.stderr)
    features = tfpipe_flags.feature_config(config_class=domain.config_class)
    domain.corpus.write(folder, per_class=_BENCH_CORPUS_PER_CLASS, settings=domain.corpus.settings_for(features),
                        progress=FLAGS.progress)
