"""`tfpipe synth`, `tfpipe prepare`, `tfpipe inspect`: make data, shard it, look at shards."""

from __future__ import annotations

import os
from typing import Sequence

from absl import flags

from tfpipe.cli import fail, usage_error
from tfpipe.core import filesystem as fs

FLAGS = flags.FLAGS

USAGE = {"synth": "usage: tfpipe synth --output DIR [--domain audio|image] [--per_class N] [flags]",
         "prepare": "usage: tfpipe prepare --input DIR|CSV --output DIR [--num_shards N --workers P] [flags]",
         "inspect": "usage: tfpipe inspect SHARD_DIR [--verify]"}  # shown by --help


# --- synth ---------------------------------------------------------------------

# Flags a domain's corpus may take: each reaches `write_files` when it has a parameter of that name.
_SYNTH_ARGS = ("sample_rate", "clip_seconds", "size")


def define_synth() -> None:
    flags.DEFINE_string("output", None, "Folder to write the corpus to (one subfolder per class).",
                        required=True)
    flags.DEFINE_string("domain", "audio", "Which corpus: 'audio' (8 learnable classes of wav clips) or 'image' "
                        "(8 learnable classes of JPEG/PNG shapes of mixed sizes and modes); any domain plug-in with "
                        "a synthetic corpus (a synthetic.py beside its domain.py).")
    flags.DEFINE_integer("per_class", 100, "Examples (clips, images) per class.", lower_bound=1)
    flags.DEFINE_integer("sample_rate", 16000, "audio: sample rate in Hz (at least 8000: the sounds span "
                         "90 Hz to 3.6 kHz or more).", lower_bound=8000)
    flags.DEFINE_float("clip_seconds", 1.0, "audio: clip length in seconds (events last 40-90% of it).",
                       lower_bound=0.5)
    flags.DEFINE_list("size", ["64", "256"], "image: smallest,largest side in pixels; each image's height and "
                      "width are drawn between them.")
    flags.DEFINE_integer("seed", 0, "Corpus seed: the same seed writes the same files.", lower_bound=0)


def _synth_module(domain: str):
    """<package>.synthetic of the domain plug-in <package>.domain named `domain`, or a usage error
    naming the domains that have one. Found by module name, none imported: no TensorFlow."""
    import importlib

    from tfpipe.core import plugins

    packages = {m.rpartition(".")[0] for m in plugins.modules() if m.endswith(".domain")}
    with_corpus = {p.rpartition(".")[2]: p for p in packages if _has_module(f"{p}.synthetic")}
    if domain not in with_corpus:
        usage_error(f"--domain={domain}: allowed values are {', '.join(sorted(with_corpus))}")
    return importlib.import_module(f"{with_corpus[domain]}.synthetic")


def _has_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _synth_value(name: str):
    """A synth flag's value as write_files takes it."""
    if name != "size":
        return FLAGS[name].value
    parts = [p.strip() for p in FLAGS.size]
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        usage_error(f"--size={','.join(FLAGS.size)}: expected two sizes in pixels, smallest,largest (e.g. 64,256)")
    return (int(parts[0]), int(parts[1]))


def run_synth(argv: Sequence[str]) -> None:
    import inspect

    if argv:
        usage_error(f"unexpected arguments {' '.join(argv)}; pass --output DIR [--per_class N]")
    module = _synth_module(FLAGS.domain)
    takes = inspect.signature(module.write_files).parameters
    unused = [f"--{name}" for name in _SYNTH_ARGS if FLAGS[name].present and name not in takes]
    if unused:
        usable = [f"--{name}" for name in _SYNTH_ARGS if name in takes]
        usage_error(f"{', '.join(unused)}: not used by the {FLAGS.domain} corpus (it takes "
                    f"{', '.join(usable) or 'none of --sample_rate, --clip_seconds, --size'})")
    kwargs = {name: _synth_value(name) for name in _SYNTH_ARGS if name in takes}
    try:
        root = os.path.abspath(module.write_files(FLAGS.output, per_class=FLAGS.per_class, seed=FLAGS.seed,
                                                  **kwargs))
    except ValueError as e:
        fail(str(e))
    names = sorted(module.CLASS_NAMES)
    settings = ", ".join(f"{name}={'-'.join(map(str, v)) if isinstance(v, tuple) else v}"
                         for name, v in kwargs.items())
    print(f"{len(names) * FLAGS.per_class} {FLAGS.domain} files ({len(names)} classes x {FLAGS.per_class}: "
          f"{', '.join(names)}){', ' + settings if settings else ''}, in {root}")
    print(f"train on it: python -m estimator_demo --data {root}   or shard it: "
          f"tfpipe prepare --input {root} --output SHARDS")


# --- prepare / inspect -----------------------------------------------------------

_RETIRED = ("worker_index", "num_hosts", "merge")  # the hand-run multi-host mode: Beam replaces it


def define_prepare() -> None:
    from tfpipe import flags as tfpipe_flags
    from tfpipe.domains.audio.config import AudioConfig

    flags.DEFINE_string("input", None, "Wav folder (one subfolder per class) or CSV manifest (path,label).")
    flags.DEFINE_string("output", None, "Shard folder to write (a rerun finishes an interrupted one).",
                        required=True)
    flags.DEFINE_boolean("overwrite", False, "Replace a complete shard folder written with other settings "
                         "(without it, such a prepare is refused, naming the settings that differ; the same "
                         "settings with added or changed inputs update the folder).")
    flags.DEFINE_integer("num_shards", None, "Shard files (default: min(16, examples), more when a shard "
                         "would exceed 256 MiB).", lower_bound=1)
    flags.DEFINE_integer("workers", None, "Worker processes, each writing whole shards (0: in this process; "
                         "default: 0 below 10,000 examples, else one per 10,000 up to the cores).", lower_bound=0)
    flags.DEFINE_enum("store", None, ["log_mel", "waveform", "jpeg", "raw"],
                      "What the shards store: audio log_mel (default) or fixed-length waveform; images "
                      "re-encoded jpeg (default) or raw uint8, resized once.")
    flags.DEFINE_enum("dtype", "float16", ["float16", "float32"], "Storage dtype (read back as float32).")
    flags.DEFINE_enum("format", "tfrecord-block", ["tfrecord-block", "tfrecord-example"],
                      "Records: blocks of examples (v2, fast reads) or one tf.train.Example per example (v1).")
    flags.DEFINE_enum("runner", "local", ["local", "beam"],
                      "Write with local worker processes, or with Apache Beam (see --beam_options).")
    flags.DEFINE_string("beam_options", None, "Beam pipeline options for --runner=beam, e.g. "
                        "'--runner=FlinkRunner --flink_master=HOST:8081' (default: DirectRunner, "
                        "multi-processing on this machine).")
    flags.DEFINE_string("split", "train", "Shard file name prefix (one split per folder).")
    flags.DEFINE_enum("on_error", "fail", ["fail", "skip"],
                      "Unreadable inputs: list every one and stop before writing, or skip them and list them "
                      "in tfpipe.json's rejected.")
    flags.DEFINE_integer("seed", 0, "Planner seed: which clip goes to which shard, record order.",
                         lower_bound=0)
    flags.DEFINE_integer("worker_index", 0, "Retired (hand-run multi-host mode): use --runner=beam.",
                         lower_bound=0)
    flags.DEFINE_integer("num_hosts", 1, "Retired (hand-run multi-host mode): use --runner=beam.",
                         lower_bound=1)
    flags.DEFINE_boolean("merge", False, "Retired (hand-run multi-host mode): use --runner=beam.")
    tfpipe_flags.define_config_flags(AudioConfig, FLAGS, exclude=("output",))  # --output is the folder
    from tfpipe.domains.image.config import ImageConfig  # --dtype is the storage dtype here

    tfpipe_flags.define_config_flags(ImageConfig, FLAGS, exclude=_IMAGE_FLAGS_TAKEN)


_IMAGE_FLAGS_TAKEN = ("dtype",)  # ImageConfig fields whose flag names prepare uses for something else


def run_prepare(argv: Sequence[str]) -> None:
    from tfpipe import flags as tfpipe_flags
    from tfpipe.errors import DataError
    from tfpipe.storage import writer

    if argv:
        fail(f"unexpected arguments {' '.join(argv)}; pass --input DIR|CSV --output DIR")
    retired = [f"--{name}" for name in _RETIRED if FLAGS[name].present]
    if retired:
        fail(f"{', '.join(retired)}: the hand-run multi-host mode is retired. To write on several machines, "
             f"run the same plan with Apache Beam: tfpipe prepare --input DATA --output SHARDS --runner=beam "
             f"--beam_options='--runner=FlinkRunner --flink_master=HOST:8081' (or SparkRunner, "
             f"DataflowRunner); the launching process writes tfpipe.json when every shard is done")
    if not FLAGS.input:
        fail("--input is required: a wav folder (one subfolder per class) or a CSV manifest (path,label)")
    try:
        from tfpipe.core.registry import get_domain
        from tfpipe.core.source import find
        from tfpipe.domains.image.config import ImageConfig

        source = find(FLAGS.input)  # found once: the writer takes the Source as it is
        domain = source.domain or "audio"
        if domain == "image":
            features = ImageConfig(**tfpipe_flags.set_fields(ImageConfig, exclude=_IMAGE_FLAGS_TAKEN))
        else:  # --output is the folder here (AudioConfig.output is --store): not a feature field
            features = tfpipe_flags.feature_config(exclude=("output",))
        store = FLAGS.store or get_domain(domain).stores()[0]
        index, stats = writer.write_shards_with_stats(
            source, FLAGS.output, num_shards=FLAGS.num_shards, num_workers=FLAGS.workers,
            features=features, store=store, split=FLAGS.split, seed=FLAGS.seed, on_error=FLAGS.on_error,
            dtype=FLAGS.dtype, format=FLAGS.format, runner=FLAGS.runner, beam_options=FLAGS.beam_options,
            overwrite=FLAGS.overwrite)
    except (DataError, ValueError) as e:
        fail(str(e))
    except OSError as e:  # a store's refusal (permission, network), named by path
        fail(f"{e.filename or FLAGS.output}: {e.strerror or e}")
    if stats.complete:
        print(f"{FLAGS.output} is already complete for this command (checked in {stats.seconds:.2f} s); "
              f"nothing to do")
        _print_written(index, FLAGS.output)
        return
    _print_written(index, FLAGS.output)
    for what, why in stats.chosen.items():
        print(f"{what.replace('_', ' ')}: {why}")
    writing = max(stats.writing_seconds, 1e-9)
    how = "with Apache Beam" if FLAGS.runner == "beam" else f"with {stats.num_workers} worker processes" \
        if stats.num_workers else "in this process"
    print(f"processed {stats.processed:,} examples in {stats.seconds:.1f} s {how}: "
          f"{stats.processed / stats.seconds:,.0f} examples/s; after {stats.startup_seconds:.1f} s start-up, "
          f"{stats.processed / writing:,.0f} examples/s over {stats.writing_seconds:.1f} s"
          + (f"; {stats.resumed_shards} of {stats.shards} shards were already complete"
             if stats.resumed_shards else ""))


def _schema_text(features: dict) -> str:
    return ", ".join(f"{k} {v['dtype']} {list(v['shape'])}" for k, v in features.items())


def _notes_text(index: dict) -> str:
    """'3 cropped, 2 resampled' (the silent conversions a domain made), or 'none'."""
    notes = {k: v for k, v in (index.get("notes") or {}).items() if v}
    return ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in notes.items()) or "none"


def _print_written(index: dict, out_dir: str) -> None:
    """One summary line per fact: counts (found = written + rejected), storage, conversions, where."""
    from tfpipe.storage.index import INDEX_NAME

    found = index["num_examples"] + len(index["rejected"])
    size = sum(s["bytes"] for s in index["shards"])
    blocks = sorted({s.get("block_size", 1) for s in index["shards"]})
    print(f"wrote {index['num_examples']:,} examples in {len(index['shards'])} shards ({_human_bytes(size)}, "
          f"{index['format']}" + (f", blocks of {'/'.join(map(str, blocks))}" if blocks != [1] else "")
          + f"; {_schema_text(index['features'])}) to {out_dir}")
    print(f"found {found:,} = written {index['num_examples']:,} + rejected {len(index['rejected']):,}"
          + (f" (reasons in {fs.join(out_dir, INDEX_NAME)}; tfpipe inspect {out_dir})"
             if index["rejected"] else ""))
    if index.get("domain"):
        print(f"converted: {_notes_text(index)}")


def define_inspect() -> None:
    flags.DEFINE_boolean("verify", False, "Re-read every shard and check every claim of the index: sha256, "
                         "record and example counts, dtype/shape by decoding, labels vs class names, strays.")


def run_inspect(argv: Sequence[str]) -> None:
    from tfpipe.core.source import find
    from tfpipe.errors import DataError
    from tfpipe.storage import verify
    from tfpipe.storage.index import INDEX_NAME, size_problem
    from tfpipe.storage.source import ShardSource

    if len(argv) != 1:
        fail(USAGE["inspect"])
    root = fs.abspath(argv[0])
    try:
        source = find(root)
        if not isinstance(source, ShardSource):
            raise DataError(f"{root}: no {INDEX_NAME}; not a shard folder (write one with "
                            f"tfpipe prepare --input {root} --output SHARDS)")
        checked = verify.verify_folder(source) if FLAGS.verify else None
    except (DataError, ValueError) as e:
        fail(str(e))
    except OSError as e:  # a store's refusal (permission, network), named by path
        fail(f"{e.filename or root}: {e.strerror or e}")
    index = source.index
    if checked is None:
        status = [size_problem(path, shard["bytes"]) or "ok"
                  for shard, path in zip(index["shards"], source.paths)]
        counts = source.class_counts()
    else:
        status = [c.problem or "verified" for c in checked.shards]
        counts = [sum(column) for column in zip(*(c.class_counts for c in checked.shards))]
    print(_table(_summary_rows(index, root, sum(map(_file_size, source.paths)))))
    print()
    class_rows = [[name, f"{n:,}" if counts else "?"] for name, n in zip(index["class_names"], counts or
                                                                        [0] * len(index["class_names"]))]
    print(_table([["class", "examples"]] + class_rows, right=(1,)))
    if not counts:
        print("(per-class counts: run with --verify)")
    print()
    shard_rows = [[s["file"], f"{s['num_examples']:,}", f"{s.get('num_records', s['num_examples']):,}",
                   f"{s['bytes']:,}", s["sha256"][:12], st] for s, st in zip(index["shards"], status)]
    print(_table([["shard", "examples", "records", "bytes", "sha256", "status"]] + shard_rows, right=(1, 2, 3)))
    if index["rejected"]:
        print()
        print(_table([["rejected", "reason"]] + [[r["path"], r["reason"]] for r in index["rejected"]]))
    damaged = [(s["file"], st) for s, st in zip(index["shards"], status) if st not in ("ok", "verified")]
    problems = [f"{fs.join(root, f)}: {why}" for f, why in damaged] + (checked.problems if checked else [])
    if problems:
        fail(f"{len(problems)} problem(s): {'; '.join(problems)}; rerun the same tfpipe prepare command to "
             f"rewrite the folder")
    if FLAGS.verify:
        print(f"\nverified {len(index['shards'])} shards: checksums, record and example counts, dtypes and "
              f"shapes, labels and class names match the index; no stray shard files")


def _summary_rows(index: dict, root: str, on_disk: int) -> list[list[str]]:
    """inspect's first table: what the folder holds and how it was made."""
    domain = index.get("domain")
    rows = [["shard folder", root],
            ["format", f"{index['format']} (version {index.get('version')}), split {index['split']!r}"],
            ["examples", f"{index['num_examples']:,} written + {len(index['rejected']):,} rejected = "
                         f"{index['num_examples'] + len(index['rejected']):,} found"],
            ["schema", _schema_text(index["features"]) + (f"; label {index['label_key']!r} int64"
                                                          if index.get("label_key") else "")]]
    if domain:
        rows += [["domain", f"{domain['name']}, stores {domain['store']} (read as "
                            f"{_schema_text(domain['features'])})"],
                 ["config", " ".join(f"{k}={v}" for k, v in domain["config"].items())],
                 ["converted", _notes_text(index)]]
    return rows + [["on disk", f"{_human_bytes(on_disk)} in {len(index['shards'])} shards"]]


def _file_size(path: str) -> int:
    """Bytes on disk, 0 for a file that is gone or cannot be looked at (the shard's status says why)."""
    try:
        return fs.getsize(path)
    except OSError:
        return 0


def _table(rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    """Rows as aligned columns (columns in `right` right-aligned)."""
    from tfpipe.bench.text import align_table

    return "\n".join(align_table(rows, right))


def _human_bytes(n: float) -> str:
    """1234567 -> '1.2 MB'."""
    unit = "B"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            break
        n /= 1000
    return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
