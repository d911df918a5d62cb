"""The `tfpipe` command: synth | prepare | inspect | bench | serve.

Each subcommand has its own flags (`tfpipe SUBCOMMAND --help`). TensorFlow's
start-up log noise is hidden (tfpipe.quiet); set TF_CPP_MIN_LOG_LEVEL=0 to see it
again. A bad command line gets one line naming the flag and exits 2; a failure
while running gets one line and exits 1.
"""

from __future__ import annotations

from tfpipe.logs import quiet

quiet()  # must happen before TensorFlow loads

import importlib  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
from typing import NoReturn, Optional, Sequence  # noqa: E402

from absl import app, flags  # noqa: E402

from tfpipe import interrupt  # noqa: E402

FLAGS = flags.FLAGS

_USAGE = """usage: tfpipe SUBCOMMAND [flags]    (tfpipe SUBCOMMAND --help for its flags)

Input pipelines that keep TensorFlow training busy.

subcommands:
{commands}

Python API: tfpipe.build_dataset / tfpipe.make_input_fn / tfpipe.write_shards.
"""

_prog = "tfpipe"  # "tfpipe SUBCOMMAND" once main() has picked one: the name errors start with


def quiet_tensorflow() -> None:
    """Hides TensorFlow's start-up logs unless the user asked for them (kept name: tfpipe.quiet)."""
    quiet()


def fail(message: str) -> NoReturn:
    """Prints the error without a traceback and exits 1."""
    # A file name that is not UTF-8 shows its odd bytes as \xNN escapes, whatever the terminal's encoding.
    text = message.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    print(f"{_prog}: error: {text}", file=sys.stderr)
    sys.exit(1)


def usage_error(message: str) -> NoReturn:
    """A bad command line: one line naming the flag and where help is, exit 2 (as argparse does)."""
    print(f"{_prog}: error: {message}; see {_prog} --help", file=sys.stderr)
    sys.exit(2)


def output_file(path: str) -> str:
    """`path`, with its folder made first (`--json runs/bench.json` in a fresh checkout)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return path


def data_domain(data: str):
    """The registered Domain of the files a folder, CSV or shard folder holds (the default domain when
    they name none). Lists the data: TensorFlow loads."""
    from tfpipe.core.registry import default_domain, get_domain
    from tfpipe.core.source import find

    name = getattr(find(data), "domain", "")
    return get_domain(name) if name else default_domain()


# --- dispatch ----------------------------------------------------------------------

# name -> (one-line doc, module in tfpipe.cli defining define_<name>() and run_<name>(argv)); a doc
# with {corpora} or {files} is completed from the registered domains (`_doc`).
_COMMANDS = {
    "synth": ("write a synthetic demo corpus of learnable classes ({corpora})", "data"),
    "prepare": ("convert a class folder ({files} files) or CSV into verified TFRecord shards", "data"),
    "inspect": ("show a shard folder's index; --verify re-reads every shard", "data"),
    "bench": ("time pipeline variants side by side and name the bottleneck", "bench"),
    "serve": ("run a tf.data service dispatcher or worker, or time 1 vs N workers", "serve"),
}


def _doc(name: str) -> str:
    """A subcommand's one-line doc, with the registered domains where it names them."""
    doc = _COMMANDS[name][0]
    if "{" not in doc:
        return doc
    from tfpipe.core import registry  # the domain plug-ins: no TensorFlow

    domains = registry.domains().values()
    return doc.format(corpora=", ".join(d.name for d in domains if d.corpus) or "none installed",
                      files=registry.known_extensions())


def _usage() -> str:
    width = max(map(len, _COMMANDS))
    return _USAGE.format(commands="\n".join(f"  {name:<{width}}  {_doc(name)}" for name in _COMMANDS))


def _print_help(name: str, module) -> None:
    """The subcommand's usage, doc and its own flags (absl's --help would list only the script's).

    Only tfpipe's flags: TensorFlow defines absl flags of its own when it loads (pfor, TPU,
    tensor_tracer), which are not about this command (absl's --helpfull lists them).
    """
    usage = getattr(module, "USAGE", {}).get(name, f"usage: tfpipe {name} [flags]")
    print(f"{usage}\n\n{_doc(name)}.\n")
    for defining, module_flags in sorted(FLAGS.flags_by_module_dict().items()):
        if defining.startswith("tfpipe") and module_flags:  # tfpipe.cli.<name> and tfpipe.flags
            print(FLAGS.module_help(defining))


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Console-script entry point."""
    global _prog
    argv = list(sys.argv if argv is None else argv)
    if len(argv) < 2:
        print(_usage(), file=sys.stderr)  # a subcommand is required: usage, not success
        sys.exit(2)
    if argv[1] in ("-h", "--help", "help"):
        print(_usage())
        sys.exit(0)
    name = argv[1]
    if name not in _COMMANDS:
        print(f"tfpipe: error: unknown subcommand {name!r} (one of {', '.join(_COMMANDS)})\n\n{_usage()}",
              file=sys.stderr)
        sys.exit(2)
    _prog = f"tfpipe {name}"
    interrupt.install()  # Ctrl-C stops the command even while TensorFlow blocks the main thread
    module = importlib.import_module(f"tfpipe.cli.{_COMMANDS[name][1]}")
    run = getattr(module, f"run_{name}")
    getattr(module, f"define_{name}")()
    if any(a in ("-h", "--help", "-help", "--helpshort") for a in argv[2:]):
        try:
            _print_help(name, module)
            sys.stdout.flush()
        except BrokenPipeError:  # `tfpipe bench --help | head`: the reader had enough
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    app.run(lambda args: run(args[1:]), argv=[_prog] + argv[2:], flags_parser=_parse_flags)


def _parse_flags(argv: Sequence[str]) -> list[str]:
    """absl's parse, with each flag error as one clean line instead of absl's FATAL and usage."""
    try:
        return FLAGS(argv)
    except flags.Error as e:
        usage_error("; ".join(_explain(line, argv) for line in str(e).splitlines() if line.strip()))


_REQUIRED = re.compile(r"flag --(\w+)=None: Flag --\1 must have a value other than None\.?$")
_UNKNOWN = re.compile(r"Unknown command line flag '([^']+)'(?:\. Did you mean: (.+?) \?)?$")


def _explain(line: str, argv: Sequence[str]) -> str:
    """One absl flag error line, said in the flags' own terms (their help, the name typed)."""
    required = _REQUIRED.match(line)
    if required:
        name = required.group(1)
        return f"--{name} is required: {_sentence(FLAGS[name].help)}"
    unknown = _UNKNOWN.match(line)
    if unknown:
        guesses = (unknown.group(2) or "").split()
        hint = f" (did you mean {' or '.join('--' + g for g in guesses)}?)" if guesses else ""
        return f"unknown flag --{unknown.group(1)}{hint}"
    for validator in _multi_flag_validators():
        prefix = f"{validator.print_flags_with_values(FLAGS)}: "
        if line.startswith(prefix):  # "flags a=None, b=2, ...: why": keep why and the flags that were set
            given = " ".join(f"--{n}={FLAGS[n].value}" for n in validator.flag_names if FLAGS[n].present)
            return line[len(prefix):] + (f" (from {given})" if given else "")
    line = line[len("flag "):] if line.startswith("flag --") else line[:1].lower() + line[1:]
    from tfpipe.flags import aliases

    for name, old in aliases().items():  # the user typed the old name: say which flag it stands for
        if line.startswith(f"--{name}=") and any(a.split("=")[0] == f"--{old}" for a in argv):
            line = f"--{old}={line[len(name) + 3:]} (--{old} is the old name of --{name})"
    return line


def _multi_flag_validators() -> list:
    """The validators that check several flags together (absl names them all in its message)."""
    found = {}
    for name in FLAGS:
        for validator in FLAGS[name].validators:
            if len(getattr(validator, "flag_names", ())) > 1:
                found[id(validator)] = validator
    return list(found.values())


def _sentence(help_text: str) -> str:
    """A flag's help as a clause: 'Folder to write to.' -> 'folder to write to'."""
    text = help_text.strip().rstrip(".")
    return text[:1].lower() + text[1:] if text[1:2].islower() else text
