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

def _define_prepare() -> None:
    pass


def _run_prepare(argv: Sequence[str]) -> None:
    raise NotImplementedError("tfpipe prepare: being built (issue 3)")


def _define_inspect() -> None:
    pass


def _run_inspect(argv: Sequence[str]) -> None:
    raise NotImplementedError("tfpipe inspect: being built (issue 3)")


# --- bench -----------------------------------------------------------------------

def _define_bench() -> None:
    pass


def _run_bench(argv: Sequence[str]) -> None:
    raise NotImplementedError("tfpipe bench: being built (issue 4)")


# --- serve -----------------------------------------------------------------------

def _define_serve() -> None:
    pass


def _run_serve(argv: Sequence[str]) -> None:
    raise NotImplementedError("tfpipe serve: being built (issue 6)")


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
        if module.startswith("tfpipe") and module_flags:
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
