"""The `tfpipe` command: synth | prepare | inspect | bench | serve.

Each subcommand has its own flags (`tfpipe SUBCOMMAND --help`). TensorFlow's
start-up log noise is hidden; set TF_CPP_MIN_LOG_LEVEL=0 to see it again.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # must happen before TensorFlow loads

import importlib  # noqa: E402
import sys  # noqa: E402
from typing import Optional, Sequence  # noqa: E402

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


def fail(message: str) -> None:
    """Prints the error without a traceback and exits 1."""
    print(f"tfpipe: error: {message}", file=sys.stderr)
    sys.exit(1)


# --- dispatch ----------------------------------------------------------------------

# name -> (one-line doc, module in tfpipe.cli defining define_<name>() and run_<name>(argv))
_COMMANDS = {
    "synth": ("write the synthetic demo corpus (learnable multi-class audio)", "data"),
    "prepare": ("convert a wav folder or CSV into verified TFRecord shards", "data"),
    "inspect": ("show a shard folder's index; --verify re-reads every shard", "data"),
    "bench": ("time pipeline variants side by side and name the bottleneck", "bench"),
    "serve": ("run a tf.data service dispatcher or worker, or time 1 vs N workers", "serve"),
}


def _usage() -> str:
    width = max(map(len, _COMMANDS))
    return _USAGE.format(commands="\n".join(f"  {name:<{width}}  {doc}" for name, (doc, _) in _COMMANDS.items()))


def _print_help(name: str, module) -> None:
    """The subcommand's usage, doc and its own flags (absl's --help would list only the script's)."""
    usage = getattr(module, "USAGE", {}).get(name, f"usage: tfpipe {name} [flags]")
    print(f"{usage}\n\n{_COMMANDS[name][0]}.\n")
    for defining, module_flags in sorted(FLAGS.flags_by_module_dict().items()):
        if not defining.startswith("absl.") and module_flags:  # tfpipe.cli.<name> and tfpipe.flags
            print(FLAGS.module_help(defining))


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
    module = importlib.import_module(f"tfpipe.cli.{_COMMANDS[name][1]}")
    run = getattr(module, f"run_{name}")
    getattr(module, f"define_{name}")()
    if any(a in ("-h", "--help", "-help", "--helpshort") for a in argv[2:]):
        _print_help(name, module)
        sys.exit(0)
    quiet_tensorflow()
    app.run(lambda args: run(args[1:]), argv=[f"tfpipe {name}"] + argv[2:])

