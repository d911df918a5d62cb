"""The `tfpipe` command: synth | prepare | inspect | bench | serve.

Each subcommand has its own flags (`tfpipe SUBCOMMAND --help`). TensorFlow's
start-up log noise is hidden; set TF_CPP_MIN_LOG_LEVEL=0 to see it again.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # must happen before TensorFlow loads

import sys  # noqa: E402
from typing import Callable, Optional, Sequence  # noqa: E402

from absl import app, flags  # noqa: E402

FLAGS = flags.FLAGS

_USAGE = """usage: tfpipe SUBCOMMAND [flags]    (tfpipe SUBCOMMAND --help for its flags)

Input pipelines that keep TensorFlow training busy.

subcommands:
{commands}

Python API: tfpipe.build_dataset / tfpipe.make_input_fn / tfpipe.write_shards.
"""


def quiet_tensorflow() -> None:
    """Hides TensorFlow's Python-side start-up warnings unless the user asked for logs."""
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3") != "0":
        import logging

        logging.getLogger("tensorflow").setLevel(logging.ERROR)


# --- synth ---------------------------------------------------------------------

def _define_synth() -> None:
    flags.DEFINE_string("output", None, "Folder to write the corpus to (one subfolder per class).",
                        required=True)
    flags.DEFINE_integer("per_class", 100, "Clips per class.", lower_bound=1)
    flags.DEFINE_integer("sample_rate", 16000, "Sample rate in Hz (at least 8000: the sounds span "
                         "90 Hz to 3.6 kHz or more).", lower_bound=8000)
    flags.DEFINE_float("clip_seconds", 1.0, "Clip length in seconds (events last 40-90% of it).",
                       lower_bound=0.5)
    flags.DEFINE_integer("seed", 0, "Corpus seed: the same seed writes the same files.", lower_bound=0)


def _run_synth(argv: Sequence[str]) -> None:
    from tfpipe import synthetic

    if argv:
        sys.exit(f"tfpipe synth: unexpected arguments {' '.join(argv)}; pass --output DIR [--per_class N]")
    try:
        source = synthetic.write_corpus(FLAGS.output, per_class=FLAGS.per_class,
                                        sample_rate=FLAGS.sample_rate, clip_seconds=FLAGS.clip_seconds,
                                        seed=FLAGS.seed)
    except ValueError as e:
        sys.exit(f"tfpipe synth: {e}")
    print(f"{source.num_examples} clips ({len(source.class_names)} classes x {FLAGS.per_class}: "
          f"{', '.join(source.class_names)}), 16-bit PCM mono at {FLAGS.sample_rate} Hz, in {source.root}")
    print(f"train on it: python -m estimator_demo --data {source.root}   or shard it: "
          f"tfpipe prepare --input {source.root} --output SHARDS")


# --- prepare / inspect -----------------------------------------------------------

_PREPARE_FEATURE_FIELDS = ("sample_rate", "clip_seconds", "n_fft", "hop_length", "n_mels", "fmin", "fmax",
                           "log_offset", "backend")  # FeatureConfig.output is --store here


def _define_prepare() -> None:
    import dataclasses

    from tfpipe import flags as tfpipe_flags
    from tfpipe.config import FeatureConfig

    flags.DEFINE_string("input", None, "Wav folder (one subfolder per class) or CSV manifest (path,label).")
    flags.DEFINE_string("output", None, "Shard folder to write (a rerun finishes an interrupted one).",
                        required=True)
    flags.DEFINE_integer("num_shards", 16, "Shard files in the whole dataset.", lower_bound=1)
    flags.DEFINE_integer("workers", 2, "Worker processes, each writing whole shards (0: in this process).",
                         lower_bound=0)
    flags.DEFINE_enum("store", "log_mel", ["log_mel", "waveform"],
                      "Store log-mel features or fixed-length waveforms.")
    flags.DEFINE_enum("dtype", "float16", ["float16", "float32"], "Storage dtype (read back as float32).")
    flags.DEFINE_string("split", "train", "Shard file name prefix.")
    flags.DEFINE_enum("on_error", "fail", ["fail", "skip"],
                      "Unreadable input: stop naming it, or skip it and list it in tfpipe.json's rejected.")
    flags.DEFINE_integer("seed", 0, "Planner seed: which clip goes to which shard, record order.",
                         lower_bound=0)
    flags.DEFINE_integer("worker_index", 0, "This host's number when several hosts write one dataset.",
                         lower_bound=0)
    flags.DEFINE_integer("num_hosts", 1, "Hosts writing the dataset (each writes its own shards).",
                         lower_bound=1)
    flags.DEFINE_boolean("merge", False,
                         "Only merge the hosts' partial indexes in --output into tfpipe.json.")
    for field in dataclasses.fields(FeatureConfig):
        if field.name in _PREPARE_FEATURE_FIELDS:
            tfpipe_flags._define(field, "FeatureConfig", FLAGS)  # pylint: disable=protected-access


def _run_prepare(argv: Sequence[str]) -> None:
    from tfpipe import shards
    from tfpipe.config import FeatureConfig
    from tfpipe.errors import DataError

    if argv:
        _fail(f"unexpected arguments {' '.join(argv)}; pass --input DIR|CSV --output DIR")
    try:
        if FLAGS.merge:
            index = shards.merge_index(FLAGS.output)
            print(f"merged the partial indexes of {FLAGS.output} into {shards.INDEX_NAME}")
            _print_written(index, FLAGS.output)
            return
        if not FLAGS.input:
            _fail("--input is required: a wav folder (one subfolder per class) "
                  "or a CSV manifest (path,label)")
        # Built here, not by tfpipe.flags.feature_config: this command's --output is a folder.
        features = FeatureConfig(**{k: FLAGS[k].value for k in _PREPARE_FEATURE_FIELDS
                                    if FLAGS[k].value is not None})
        index, stats = shards.write_shards_with_stats(
            FLAGS.input, FLAGS.output, num_shards=FLAGS.num_shards, num_workers=FLAGS.workers,
            features=features, store=FLAGS.store, split=FLAGS.split, seed=FLAGS.seed,
            on_error=FLAGS.on_error, dtype=FLAGS.dtype, worker_index=FLAGS.worker_index,
            num_hosts=FLAGS.num_hosts)
    except (DataError, ValueError) as e:
        _fail(str(e))
    _print_written(index, FLAGS.output)
    writing = max(stats.writing_seconds, 1e-9)
    print(f"processed {stats.processed:,} examples in {stats.seconds:.1f} s with {FLAGS.workers} workers: "
          f"{stats.processed / stats.seconds:,.0f} examples/s; after {stats.startup_seconds:.1f} s start-up, "
          f"{stats.processed / writing:,.0f} examples/s over {stats.writing_seconds:.1f} s"
          + (f"; {stats.resumed_shards} of {stats.shards} shards were already complete"
             if stats.resumed_shards else ""))
    if "host" in index:
        print(f"host {FLAGS.worker_index} of {FLAGS.num_hosts} done; the index is merged when every host has "
              f"finished (or run: tfpipe prepare --merge --output {FLAGS.output})")


def _print_written(index: dict, out_dir: str) -> None:
    """One summary line per fact: counts (found = written + rejected), storage, where."""
    found = index["num_examples"] + len(index["rejected"])
    size = sum(s["bytes"] for s in index["shards"])
    print(f"wrote {index['num_examples']:,} examples in {len(index['shards'])} shards ({_human_bytes(size)}, "
          f"{index['store']} {index['dtype']} {index['shape']}) to {out_dir}")
    print(f"found {found:,} = written {index['num_examples']:,} + rejected {len(index['rejected']):,}"
          + (f" (reasons in {os.path.join(out_dir, 'tfpipe.json')}; tfpipe inspect {out_dir})"
             if index["rejected"] else ""))


def _define_inspect() -> None:
    flags.DEFINE_boolean("verify", False, "Re-read every shard: sha256, record count, labels, feature sizes.")


def _run_inspect(argv: Sequence[str]) -> None:
    from tfpipe import shards, sources
    from tfpipe.errors import DataError

    if len(argv) != 1:
        _fail("usage: tfpipe inspect SHARD_DIR [--verify]")
    root = os.path.abspath(argv[0])
    try:
        source = sources.find_examples(root)
        if source.kind != "shards":
            raise DataError(f"{root}: no {shards.INDEX_NAME}; not a shard folder (if prepare ran on several "
                            f"hosts, run tfpipe prepare --merge --output {root})")
        checks = shards.verify_shards(root) if FLAGS.verify else None
    except (DataError, ValueError) as e:
        _fail(str(e))
    index = source.index
    if checks is None:
        status = [_size_status(path, shard["bytes"]) for shard, path in zip(index["shards"], source.paths)]
        counts = shards.stored_class_counts(source)
    else:
        status = [c.problem or "verified" for c in checks]
        counts = [sum(column) for column in zip(*(c.class_counts for c in checks))]
    on_disk = sum(os.path.getsize(p) for p in source.paths)
    features = " ".join(f"{k}={v}" for k, v in index["features"].items())
    print(_table([["shard folder", root],
                  ["format", f"{index['format']} v{index['version']}, split {index['split']!r}"],
                  ["examples", f"{index['num_examples']:,} written + {len(index['rejected']):,} rejected = "
                               f"{index['num_examples'] + len(index['rejected']):,} found"],
                  ["stored", f"{index['store']}, {index['dtype']}, shape {index['shape']} per example"],
                  ["features", features],
                  ["on disk", f"{_human_bytes(on_disk)} in {len(index['shards'])} shards"]]))
    print()
    class_rows = [[name, f"{n:,}" if counts else "?"] for name, n in zip(index["class_names"], counts or
                                                                        [0] * len(index["class_names"]))]
    print(_table([["class", "examples"]] + class_rows, right=(1,)))
    if not counts:
        print("(per-class counts: run with --verify)")
    print()
    shard_rows = [[s["file"], f"{s['num_examples']:,}", f"{s['bytes']:,}", s["sha256"][:12], st]
                  for s, st in zip(index["shards"], status)]
    print(_table([["shard", "examples", "bytes", "sha256", "status"]] + shard_rows, right=(1, 2)))
    if index["rejected"]:
        print()
        print(_table([["rejected", "reason"]] + [[r["path"], r["reason"]] for r in index["rejected"]]))
    damaged = [(s["file"], st) for s, st in zip(index["shards"], status) if st not in ("ok", "verified")]
    if damaged:
        listed = "; ".join(f"{os.path.join(root, f)}: {why}" for f, why in damaged)
        _fail(f"{len(damaged)} damaged shard(s): {listed}; "
              f"rerun the same tfpipe prepare command to rewrite them")
    if FLAGS.verify:
        print(f"\nverified {len(index['shards'])} shards: checksums, record counts, labels and sizes match")


def _size_status(path: str, expected: int) -> str:
    """'ok' when the shard's size on disk matches the index (the check without --verify)."""
    actual = os.path.getsize(path)
    return "ok" if actual == expected else f"{actual:,} bytes on disk, index lists {expected:,}"


def _table(rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    """Rows as aligned columns (columns in `right` right-aligned)."""
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(v).rjust(w) if i in right else str(v).ljust(w)
                               for i, (v, w) in enumerate(zip(row, widths))).rstrip() for row in rows)


def _human_bytes(n: float) -> str:
    """1234567 -> '1.2 MB'."""
    unit = "B"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            break
        n /= 1000
    return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"


def _fail(message: str) -> None:
    """Prints the error without a traceback and exits 1."""
    print(f"tfpipe: error: {message}", file=sys.stderr)
    sys.exit(1)


# --- bench -----------------------------------------------------------------------

_BENCH_CORPUS_PER_CLASS = 250  # x 8 synthetic classes = 2000 clips when --data is not given


def _define_bench() -> None:
    from tfpipe import flags as tfpipe_flags
    from tfpipe.config import FeatureConfig, PipelineConfig

    flags.DEFINE_string("data", None, "Wav folder (one subfolder per class), CSV manifest or shard folder. "
                        "Unset: a temporary synthetic corpus of 2000 one-second clips.")
    flags.DEFINE_string("shards", None, "Shard folder the `shards` variants read (write one with tfpipe prepare).")
    flags.DEFINE_string("variants", "naive,optimized",
                        "Comma-separated variants; the first is the baseline. Names: optimized, naive (the "
                        "presets), keras (audio_dataset_from_directory + the same log-mel map + prefetch), "
                        "shards (the --shards folder; shards:naive for the naive chain). Each may add "
                        "PipelineConfig/FeatureConfig fields: NAME:field=value,field=value, e.g. "
                        "optimized:fuse_maps=false, naive:backend=librosa, optimized:batch_size=32,n_mels=40. "
                        "The field flags below (--batch_size, --n_mels, --noprefetch, ...) apply to every "
                        "variant first.")
    flags.DEFINE_string("baseline", None, "Variant the ratios compare to (default: the first).")
    flags.DEFINE_boolean("ablation", False, "Also time optimized with each toggle flipped to naive alone, naive "
                         "with each switched on alone, and each with the other feature backend.")
    flags.DEFINE_float("step_ms", 0.0, "Simulated accelerator step per batch, in ms of sleep: shows how much "
                       "of the step the input hides (prefetch: max(input, step) instead of input + step).",
                       lower_bound=0.0)
    flags.DEFINE_integer("batches", None, "Batches timed per variant per round (default: one epoch, at most 50).",
                         lower_bound=1)
    flags.DEFINE_integer("repeats", 5, "Rounds; every variant takes one turn per round (--prepare: runs per "
                         "worker count).", lower_bound=1)
    flags.DEFINE_integer("warmup", 3, "Untimed batches after the first one.", lower_bound=0)
    flags.DEFINE_boolean("stages", True, "Measure each stage's single-thread rate, the limiting stage and the "
                         "ideal (wav data only).")
    flags.DEFINE_float("stage_seconds", 0.5, "Time budget of each stage measurement.", lower_bound=0.05)
    flags.DEFINE_string("json", None, "Write every number, config and machine fact to this JSON file.")
    flags.DEFINE_string("plot", None, "Write a PNG bar chart (examples/s per variant, min-max, ideal) here.")
    flags.DEFINE_boolean("progress", True, "Show a progress line on stderr.")
    flags.DEFINE_boolean("prepare", False, "Instead of pipelines, time tfpipe.write_shards for each --workers count.")
    flags.DEFINE_list("workers", ["1", "2"], "--prepare: worker counts to compare, first = reference.")
    flags.DEFINE_integer("num_shards", 8, "--prepare: shards written per run.", lower_bound=1)
    flags.DEFINE_enum("store", "log_mel", ["log_mel", "waveform"], "--prepare: what the shards store.")
    # Field flags set a common base for every variant; a variant's own :field=value wins.
    for config in (PipelineConfig, FeatureConfig):
        tfpipe_flags.define_config_flags(config, FLAGS)


def _run_bench(argv: Sequence[str]) -> None:
    import contextlib
    import dataclasses
    import tempfile

    from tfpipe import bench
    from tfpipe.config import FeatureConfig, PipelineConfig
    from tfpipe.errors import DataError

    if argv:
        _fail(f"unexpected arguments {' '.join(argv)}; pass --data DIR --variants naive,optimized")
    fields = [f.name for c in (PipelineConfig, FeatureConfig) for f in dataclasses.fields(c)]
    overrides = {name: FLAGS[name].value for name in fields if FLAGS[name].value is not None}
    feature_names = {f.name for f in dataclasses.fields(FeatureConfig)}
    try:
        with contextlib.ExitStack() as stack:
            data = FLAGS.data
            if data is None:
                from tfpipe import synthetic

                data = stack.enter_context(tempfile.TemporaryDirectory(prefix="tfpipe-bench-corpus-"))
                print(f"no --data: writing a temporary synthetic corpus ({_BENCH_CORPUS_PER_CLASS} clips x "
                      f"{len(synthetic.CLASS_NAMES)} classes) to {data}", file=sys.stderr)
                synthetic.write_corpus(data, per_class=_BENCH_CORPUS_PER_CLASS,
                                       sample_rate=overrides.get("sample_rate", 16000),
                                       clip_seconds=overrides.get("clip_seconds", 1.0), progress=FLAGS.progress)
            if FLAGS.prepare:
                if not all(w.isdigit() for w in FLAGS.workers):
                    _fail(f"--workers={','.join(FLAGS.workers)}: expected worker counts, e.g. --workers 1,2")
                features = FeatureConfig(**{k: v for k, v in overrides.items() if k in feature_names})
                result = bench.run_prepare(data, [int(w) for w in FLAGS.workers], repeats=FLAGS.repeats,
                                           num_shards=FLAGS.num_shards, features=features, store=FLAGS.store,
                                           progress=FLAGS.progress)
            else:
                result = bench.run(data, bench.split_variants(FLAGS.variants), shards=FLAGS.shards,
                                   ablation=FLAGS.ablation, baseline=FLAGS.baseline, step_ms=FLAGS.step_ms,
                                   batches=FLAGS.batches, repeats=FLAGS.repeats, warmup=FLAGS.warmup,
                                   overrides=overrides, stages=FLAGS.stages, stage_seconds=FLAGS.stage_seconds,
                                   progress=FLAGS.progress)
    except (DataError, ValueError) as e:
        _fail(str(e))
    print(result.table())
    if FLAGS.json:
        with open(FLAGS.json, "w") as f:
            f.write(result.to_json() + "\n")
        print(f"wrote {FLAGS.json}")
    if FLAGS.plot:
        if FLAGS.prepare:
            _fail("--plot draws pipeline variants; --prepare has only its table and --json")
        result.plot(FLAGS.plot)
        print(f"wrote {FLAGS.plot}")


# --- serve -----------------------------------------------------------------------

_SERVE_USAGE = ("usage: tfpipe serve dispatcher --port P [--work_dir DIR]\n"
                "       tfpipe serve worker --dispatcher HOST:P --port Q [--worker_host NAME]\n"
                "       tfpipe serve bench --data DIR [--workers 0,1,2] [--pipeline=naive ...]")


def _define_serve() -> None:
    from tfpipe import flags as tfpipe_flags

    flags.DEFINE_integer("port", None, "Port this server listens on, on all interfaces (0: any free port).",
                         lower_bound=0, upper_bound=65535)
    flags.DEFINE_string("work_dir", None, "dispatcher: journal its state here; recover it after a restart.")
    flags.DEFINE_float("worker_timeout", None, "dispatcher: seconds without a heartbeat before a worker "
                       "counts as gone (unset: TensorFlow's default).", lower_bound=0.1)
    flags.DEFINE_string("dispatcher", None, "worker: the dispatcher's HOST:PORT.")
    flags.DEFINE_string("worker_host", None, "worker: the name consumers reach this worker by (default: "
                        "localhost for a dispatcher on this host, else this machine's hostname).")
    flags.DEFINE_string("data", None, "bench: wav folder, CSV manifest or shard folder to read.")
    flags.DEFINE_list("workers", ["0", "1", "2"], "bench: service worker counts to compare (0: no service, "
                      "the chain runs in the bench process).")
    flags.DEFINE_integer("batches", 50, "bench: timed batches per run.", lower_bound=1)
    flags.DEFINE_integer("warmup", 5, "bench: untimed batches before each timed run.", lower_bound=0)
    flags.DEFINE_integer("repeats", 3, "bench: runs per worker count (interleaved; the median is reported).",
                         lower_bound=1)
    flags.DEFINE_boolean("pin_workers", True, "bench: pin worker i to CPU i, so each worker stands for one "
                         "single-core machine (Linux).")
    flags.DEFINE_string("json", None, "bench: also write the results to this JSON file.")
    tfpipe_flags.define_flags()


def _run_serve(argv: Sequence[str]) -> None:
    role = argv[0] if len(argv) == 1 else None
    if role not in ("dispatcher", "worker", "bench"):
        got = " ".join(argv) or "nothing"
        _fail(f"expected one of dispatcher | worker | bench, got {got}\n{_SERVE_USAGE}")
    if role != "bench" and FLAGS.port is None:
        _fail(f"--port is required (0: any free port)\n{_SERVE_USAGE}")
    if role == "worker" and not FLAGS.dispatcher:
        _fail(f"--dispatcher HOST:PORT is required\n{_SERVE_USAGE}")
    if role == "bench" and not FLAGS.data:
        _fail("--data is required: a wav folder, CSV manifest or shard folder")
    from tfpipe import service  # loads TensorFlow: after the cheap checks

    try:
        if role == "dispatcher":
            timeout_ms = None if FLAGS.worker_timeout is None else int(FLAGS.worker_timeout * 1000)
            service.run_dispatcher(FLAGS.port, FLAGS.work_dir, worker_timeout_ms=timeout_ms)
        elif role == "worker":
            service.run_worker(FLAGS.dispatcher, FLAGS.port, worker_host=FLAGS.worker_host)
        else:
            _run_serve_bench()
    except ValueError as e:
        _fail(str(e))


def _run_serve_bench() -> None:
    """tfpipe serve bench: examples/s through 0 (local), 1, 2, ... service workers."""
    from tfpipe import flags as tfpipe_flags
    from tfpipe import service_bench

    try:
        counts = [int(n) for n in FLAGS.workers]
    except ValueError:
        _fail(f"--workers={','.join(FLAGS.workers)}: expected worker counts, e.g. 0,1,2")
    result = service_bench.bench_workers(FLAGS.data, counts, tfpipe_flags.pipeline_config(),
                                         tfpipe_flags.feature_config(), batches=FLAGS.batches,
                                         warmup=FLAGS.warmup, repeats=FLAGS.repeats,
                                         pin_workers=FLAGS.pin_workers, out=sys.stdout)
    print(service_bench.format_bench(result))
    if FLAGS.json:
        import json

        with open(FLAGS.json, "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {FLAGS.json}")


# --- dispatch ----------------------------------------------------------------------

_COMMANDS: dict[str, tuple[str, Callable[[], None], Callable[[Sequence[str]], None]]] = {
    "synth": ("write the synthetic demo corpus (learnable multi-class audio)", _define_synth, _run_synth),
    "prepare": ("convert a wav folder or CSV into verified TFRecord shards", _define_prepare, _run_prepare),
    "inspect": ("show a shard folder's index; --verify re-reads every shard", _define_inspect, _run_inspect),
    "bench": ("time pipeline variants side by side and name the bottleneck", _define_bench, _run_bench),
    "serve": ("run a tf.data service dispatcher or worker", _define_serve, _run_serve),
}


def _usage() -> str:
    width = max(map(len, _COMMANDS))
    return _USAGE.format(commands="\n".join(f"  {name:<{width}}  {doc}" for name, (doc, _, _) in _COMMANDS.items()))


def _print_help(name: str) -> None:
    """The subcommand's doc and its own flags (absl's --help would list only the script's)."""
    print(f"usage: tfpipe {name} [flags]\n\n{_COMMANDS[name][0]}.\n")
    for module, module_flags in sorted(FLAGS.flags_by_module_dict().items()):
        if not module.startswith("absl.") and module_flags:  # ours, whatever name `-m` gave cli.py
            print(FLAGS.module_help(module))


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Console-script entry point."""
    argv = list(sys.argv if argv is None else argv)
    if len(argv) < 2 or argv[1] in ("-h", "--help", "help"):
        print(_usage())
        sys.exit(0)
    name = argv[1]
    if name not in _COMMANDS:
        print(f"tfpipe: unknown subcommand {name!r}\n\n{_usage()}", file=sys.stderr)
        sys.exit(2)
    _, define, run = _COMMANDS[name]
    define()
    if any(a in ("-h", "--help", "-help", "--helpshort") for a in argv[2:]):
        _print_help(name)
        sys.exit(0)
    quiet_tensorflow()
    app.run(lambda args: run(args[1:]), argv=[f"tfpipe {name}"] + argv[2:])


if __name__ == "__main__":
    main()
