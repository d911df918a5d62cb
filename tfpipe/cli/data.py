"""`tfpipe synth`, `tfpipe prepare`, `tfpipe inspect`: make data, shard it, look at shards."""

from __future__ import annotations

import os
import sys
from typing import Sequence

from absl import flags

from tfpipe.cli import fail, usage_error
from tfpipe.core import filesystem as fs

FLAGS = flags.FLAGS

USAGE = {"synth": "usage: tfpipe synth --output DIR [--domain NAME] [--per_class N] [flags]",
         "prepare": "usage: tfpipe prepare --input DIR|CSV --output DIR [--num_shards N --workers P] [flags]",
         "inspect": "usage: tfpipe inspect SHARD_DIR [--verify]"}  # shown by --help


# --- synth ---------------------------------------------------------------------

def _corpora() -> dict:
    """{name: Domain} of the registered domains with a synthetic corpus (their modules: no TensorFlow)."""
    from tfpipe.core import registry

    return {name: d for name, d in registry.domains().items() if d.corpus is not None}


def define_synth() -> None:
    from tfpipe import flags as tfpipe_flags
    from tfpipe.core import registry

    corpora = _corpora()
    default = registry.default_domain()
    flags.DEFINE_string("output", None, "Folder to write the corpus to (one subfolder per class).",
                        required=True)
    flags.DEFINE_string("domain", default.name if default.corpus else next(iter(corpora), None),
                        "Which corpus: " + "; ".join(f"{name} ({d.corpus.about})" if d.corpus.about else name
                                                     for name, d in corpora.items())
                        + ". Any domain plug-in with a synthetic corpus (Domain.corpus) adds its own.")
    flags.DEFINE_integer("per_class", 100, "Examples per class.", lower_bound=1)
    flags.DEFINE_integer("seed", 0, "Corpus seed: the same seed writes the same files.", lower_bound=0)
    for domain in corpora.values():  # each corpus' settings are flags (a name two corpora share: one flag)
        tfpipe_flags.define_config_flags(domain.corpus.settings, FLAGS)


def run_synth(argv: Sequence[str]) -> None:
    import dataclasses

    from tfpipe import flags as tfpipe_flags

    if argv:
        usage_error(f"unexpected arguments {' '.join(argv)}; pass --output DIR [--per_class N]")
    corpora = _corpora()
    if FLAGS.domain not in corpora:
        usage_error(f"--domain={FLAGS.domain}: allowed values are {', '.join(sorted(corpora))}")
    corpus = corpora[FLAGS.domain].corpus
    takes = [tfpipe_flags.flag_name(corpus.settings, f.name) for f in dataclasses.fields(corpus.settings)]
    every = dict.fromkeys(tfpipe_flags.flag_name(d.corpus.settings, f.name)
                          for d in corpora.values() for f in dataclasses.fields(d.corpus.settings))
    unused = [f"--{name}" for name in every if FLAGS[name].present and name not in takes]
    if unused:
        usage_error(f"{', '.join(unused)}: not used by the {FLAGS.domain} corpus (it takes "
                    f"{', '.join('--' + name for name in takes) or 'no settings'})")
    try:
        settings = corpus.settings(**tfpipe_flags.set_fields(corpus.settings))
    except ValueError as e:
        usage_error(_flag_spelling(str(e), corpus.settings))
    try:
        root = os.path.abspath(corpus.write(FLAGS.output, per_class=FLAGS.per_class, seed=FLAGS.seed,
                                            settings=settings))
    except ValueError as e:
        fail(str(e))
    names = sorted(e.name for e in os.scandir(root) if e.is_dir())
    values = dataclasses.asdict(settings)
    shown = ", ".join(f"{name}={'-'.join(map(str, v)) if isinstance(v, tuple) else v}" for name, v in values.items())
    print(f"{len(names) * FLAGS.per_class} {FLAGS.domain} files ({len(names)} classes x {FLAGS.per_class}: "
          f"{', '.join(names)}){', ' + shown if shown else ''}, in {root}")
    print(f"train on it: python -m estimator_demo --data {root}   or shard it: "
          f"tfpipe prepare --input {root} --output SHARDS")


def _flag_spelling(message: str, config: type) -> str:
    """A config's message in flag terms: "Config.field=v: why" -> "--flag=v: why" (the library names fields)."""
    import dataclasses

    from tfpipe import flags as tfpipe_flags

    for field in dataclasses.fields(config):
        prefix = f"{config.__name__}.{field.name}="
        if message.startswith(prefix):
            return f"--{tfpipe_flags.flag_name(config, field.name)}={message[len(prefix):]}"
    return message


# --- prepare / inspect -----------------------------------------------------------

_RETIRED = ("worker_index", "num_hosts", "merge")  # the hand-run multi-host mode: Beam replaces it


def define_prepare() -> None:
    from tfpipe import flags as tfpipe_flags
    from tfpipe.core import registry
    from tfpipe.storage.formats import FORMATS  # the format registry: no TensorFlow

    domains = registry.domains().values()
    flags.DEFINE_string("input", None, f"Folder with one subfolder per class of a domain's files "
                        f"({registry.known_extensions()}) or CSV manifest (path,label).")
    flags.DEFINE_string("output", None, "Shard folder to write (a rerun finishes an interrupted one).",
                        required=True)
    flags.DEFINE_boolean("overwrite", False, "Replace a complete shard folder written with other settings "
                         "(without it, such a prepare is refused, naming the settings that differ; the same "
                         "settings with added or changed inputs update the folder).")
    flags.DEFINE_integer("num_shards", None, "Shard files (default: min(16, examples), more when a shard "
                         "would exceed 256 MiB).", lower_bound=1)
    flags.DEFINE_integer("workers", None, "Worker processes, each writing whole shards (0: in this process; "
                         "default: 0 below 10,000 examples, else one per 10,000 up to the cores).", lower_bound=0)
    flags.DEFINE_enum("store", None, list(dict.fromkeys(s for d in domains for s in d.stores())),
                      "What the shards store; the data's domain decides which (default: its first): "
                      + "; ".join(f"{d.name} {' or '.join(d.stores())}" for d in domains) + ".")
    flags.DEFINE_enum("dtype", "float16", ["float16", "float32"], "Storage dtype (read back as float32).")
    flags.DEFINE_enum("format", "tfrecord-block", list(FORMATS),
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
    for config in tfpipe_flags.domain_configs():
        tfpipe_flags.define_config_flags(config, FLAGS, exclude=_not_prepare_flags(config))


def _not_prepare_flags(config: type) -> tuple[str, ...]:
    """Fields of a domain config prepare takes no flag for: those whose flag name is one of prepare's own
    (--output is the folder, --dtype the storage dtype) and those marked prepare=False (--store plays them)."""
    import dataclasses

    from tfpipe import flags as tfpipe_flags

    own = {f.name for f in FLAGS.flags_by_module_dict().get(__name__, [])}
    return tuple(f.name for f in dataclasses.fields(config)
                 if tfpipe_flags.flag_name(config, f.name) in own or f.metadata.get("prepare") is False)


def run_prepare(argv: Sequence[str]) -> None:
    from tfpipe.cli import rerun

    if argv:
        fail(f"unexpected arguments {' '.join(argv)}; pass --input DIR|CSV --output DIR")
    retired = [f"--{name}" for name in _RETIRED if FLAGS[name].present]
    if retired:
        fail(f"{', '.join(retired)}: the hand-run multi-host mode is retired. To write on several machines, "
             f"run the same plan with Apache Beam: tfpipe prepare --input DATA --output SHARDS --runner=beam "
             f"--beam_options='--runner=FlinkRunner --flink_master=HOST:8081' (or SparkRunner, "
             f"DataflowRunner); the launching process writes tfpipe.json when every shard is done")
    if not FLAGS.input:
        fail("--input is required: a folder with one subfolder per class, or a CSV manifest (path,label)")
    try:
        command = rerun.command_key(FLAGS.input, FLAGS)
        done = rerun.complete(FLAGS.output, command)  # the same command on its complete folder: no TensorFlow
        if done is not None:
            _print_complete(done.index, done.seconds)
            return
        index, stats = _write()
    except KeyboardInterrupt:  # one line, not a traceback: what is done is kept
        print("\ntfpipe prepare: stopped (Ctrl-C); finished shards are kept: rerun the same command to go on",
              file=sys.stderr, flush=True)
        sys.exit(130)
    rerun.remember(FLAGS.output, command)
    _print_outcome(index, stats)


def _write():
    """write_shards_with_stats as the flags ask, over the --input's domain (a usage failure: one line)."""
    from tfpipe import flags as tfpipe_flags
    from tfpipe.errors import DataError
    from tfpipe.storage import writer

    try:
        from tfpipe.core.registry import default_domain, get_domain
        from tfpipe.core.source import find

        source = find(FLAGS.input)  # found once: the writer takes the Source as it is
        domain = get_domain(source.domain) if getattr(source, "domain", "") else default_domain()
        features = tfpipe_flags.feature_config(config_class=domain.config_class,
                                               exclude=_not_prepare_flags(domain.config_class))
        return writer.write_shards_with_stats(
            source, FLAGS.output, num_shards=FLAGS.num_shards, num_workers=FLAGS.workers,
            features=features, store=FLAGS.store or domain.stores()[0], split=FLAGS.split, seed=FLAGS.seed,
            on_error=FLAGS.on_error, dtype=FLAGS.dtype, format=FLAGS.format, runner=FLAGS.runner,
            beam_options=FLAGS.beam_options, overwrite=FLAGS.overwrite)
    except (DataError, ValueError) as e:
        fail(str(e))
    except OSError as e:  # a store's refusal (permission, network), named by path
        fail(f"{e.filename or FLAGS.output}: {e.strerror or e}")


def _print_outcome(index: dict, stats) -> None:
    """What the writer did (or that the folder was complete already)."""
    if stats.complete:
        _print_complete(index, stats.seconds)
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


def _print_complete(index: dict, seconds: float) -> None:
    print(f"{FLAGS.output} is already complete for this command (checked in {seconds:.2f} s); nothing to do")
    _print_written(index, FLAGS.output)


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
