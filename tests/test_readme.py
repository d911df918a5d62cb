"""Every ```python and ```bash block in README.md runs, so the README cannot drift from the code.

Each block is one test. A python block runs as a script in a fresh temp folder (its working
directory); a bash block runs its commands there one by one with bash, `tfpipe` on PATH (this
venv's), and must exit 0. Fences without a language, or with another one (```text), are
sample output and are not run.

An HTML comment on the line right above a fence (invisible on GitHub) tells the harness how:

    <!-- test: DIRECTIVE; DIRECTIVE; ... -->

  skip: REASON            do not run the block (it runs the whole suite, needs a GPU, ...).
  xfail: REASON           run it and expect it to fail (strict: once it passes, remove the marker).
  corpus PATH [N]         first write the synthetic corpus (`tfpipe synth`, N clips per class,
                          default 3) at PATH, relative to the block's folder: `corpus data/`
                          lets a block that reads "data/" run.
  replace OLD => NEW      run the block with OLD replaced by NEW (to shrink sizes:
                          `replace --per_class 250 => --per_class 3`); OLD must occur.
  help-only [PREFIX, ...] bash: do not run the commands (all, or those starting with a PREFIX,
                          e.g. `help-only tfpipe bench, tfpipe serve`); instead every --flag a
                          command names must exist in its `--help` (tfpipe SUB or python -m MOD),
                          and a `python SCRIPT.py ARGS` must name a script of the repository.
  env NAME=VALUE          set an environment variable for the block.
  link PATH               make the repository's PATH visible at PATH in the block's folder (a
                          symlink), for blocks that, run from a checkout, use its files.
  timeout SECONDS         per command / script (default 120).

A block without a marker runs as written. An unknown directive fails the test, as does a
marker above a fence that is not run.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.support import ROOT
README = os.path.join(ROOT, "README.md")
_RUN_LANGS = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash"}
_MARKER = re.compile(r"^<!--\s*test:(.*?)-->\s*$")
_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
_DEFAULT_PER_CLASS = 3
_DEFAULT_TIMEOUT = 120


@dataclasses.dataclass
class Block:
    """One fenced block and what its marker asks."""

    line: int  # 1-based line of the opening fence
    lang: str  # "python", "bash" or "" (not run)
    code: str
    skip: str = ""
    xfail: str = ""
    corpora: list = dataclasses.field(default_factory=list)  # (path, per_class)
    replace: list = dataclasses.field(default_factory=list)  # (old, new)
    help_only: list = dataclasses.field(default_factory=list)  # command prefixes; [""] = every command
    env: dict = dataclasses.field(default_factory=dict)
    links: list = dataclasses.field(default_factory=list)  # repository paths linked into the block's folder
    timeout: float = _DEFAULT_TIMEOUT

    @property
    def source(self) -> str:
        """The code as it runs: the marker's replacements applied."""
        code = self.code
        for old, new in self.replace:
            if old not in code:
                raise ValueError(f"README.md:{self.line}: replace {old!r}: not in the block (did the README change?)")
            code = code.replace(old, new)
        return code


def parse_blocks(text: str) -> list[Block]:
    """The fenced blocks of a markdown text with their markers read.

    Raises:
      ValueError: an unknown directive, or a marker above a block that is not run.
    """
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        indent, info = fence.groups()
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        code = "\n".join(line[len(indent):] if line.startswith(indent) else line for line in lines[i + 1:end])
        block = Block(line=i + 1, lang=_RUN_LANGS.get(info.lower(), ""), code=code + "\n")
        marker = _MARKER.match(lines[i - 1].strip()) if i > 0 else None
        if marker:
            if not block.lang:
                raise ValueError(f"README.md:{i + 1}: a test marker above a ```{info} block, which is not run")
            _read_marker(block, marker.group(1))
        blocks.append(block)
        i = end + 1
    return blocks


def _read_marker(block: Block, text: str) -> None:
    """Fills `block` from '<!-- test: ... -->' directives (see the module docstring)."""
    for directive in filter(None, (d.strip() for d in text.split(";"))):
        word, _, rest = directive.partition(" ")
        word, rest = word.rstrip(":"), rest.strip()
        if word in ("skip", "xfail"):  # "skip: REASON" (or "skip (REASON)")
            setattr(block, word, directive[len(word):].lstrip(":").strip() or word)
        elif word == "corpus" and rest:
            path, *n = rest.split()
            block.corpora.append((path, int(n[0]) if n else _DEFAULT_PER_CLASS))
        elif word == "replace" and "=>" in rest:
            old, new = (part.strip() for part in rest.split("=>", 1))
            block.replace.append((old, new))
        elif word == "help-only":
            block.help_only = [p.strip() for p in rest.split(",")] if rest else [""]
        elif word == "env" and "=" in rest:
            name, value = rest.split("=", 1)
            block.env[name.strip()] = value.strip()
        elif word == "timeout" and rest:
            block.timeout = float(rest)
        elif word == "link" and rest:
            block.links.append(rest)
        else:
            raise ValueError(f"README.md:{block.line}: unknown test directive {directive!r} (see tests/test_readme.py)")


def commands(code: str) -> list[str]:
    """A bash block's commands: backslash continuations joined, comment-only and blank lines dropped."""
    joined = re.sub(r"\s*\\\n\s*", " ", code)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


_TF_NOISE = re.compile(r"cuda|cuDNN|cuFFT|cuBLAS|oneDNN|TensorRT|cpu_feature_guard")


def _env(block_env: dict) -> dict:
    bin_dir = os.path.dirname(sys.executable)  # this venv: its `tfpipe` and `python`
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
            "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **block_env}


def _check(run: subprocess.CompletedProcess, what: str) -> None:
    if run.returncode != 0:
        raise AssertionError(f"{what} exited {run.returncode}\n--- stdout\n{run.stdout[-3000:]}\n"
                             f"--- stderr\n{run.stderr[-3000:]}")


def help_command(argv: list[str]) -> list[str]:
    """The command that prints the --help of the program `argv` calls (tfpipe SUB, python -m MOD)."""
    if argv[0] == "tfpipe" and len(argv) > 1:
        return ["tfpipe", argv[1], "--help"]
    if os.path.basename(argv[0]).startswith("python") and argv[1:2] == ["-m"] and len(argv) > 2:
        return [argv[0], "-m", argv[2], "--help"]
    raise ValueError(f"help-only: cannot find the --help of {' '.join(argv)!r} (tfpipe SUB or python -m MOD)")


def unknown_flags(command: str, help_text: str) -> list[str]:
    """The --flags of `command` that its help does not list (--noX counts for a --[no]X boolean)."""
    listed = set(re.findall(r"^\s*--(\[no\])?(\w+)", help_text, re.M))
    names = {name for _, name in listed}
    booleans = {name for no, name in listed if no}
    unknown = []
    for arg in shlex.split(command, comments=True):
        if not arg.startswith("--") or arg == "--":
            continue
        name = arg[2:].split("=", 1)[0]
        if name not in names and not (name.startswith("no") and name[2:] in booleans):
            unknown.append(arg.split("=", 1)[0])
    return unknown


def run_block(block: Block, cwd: str) -> None:
    """Runs one block in `cwd` as the module docstring says; raises AssertionError when it fails."""
    env = _env(block.env)
    for path in block.links:
        os.makedirs(os.path.dirname(os.path.join(cwd, path)) or cwd, exist_ok=True)
        os.symlink(os.path.join(ROOT, path), os.path.join(cwd, path))
    for path, per_class in block.corpora:
        _check(subprocess.run(["tfpipe", "synth", "--output", path, "--per_class", str(per_class)],
                              capture_output=True, text=True, cwd=cwd, env=env, timeout=block.timeout),
               f"README.md:{block.line}: corpus {path}")
    if block.lang == "python":
        script = os.path.join(cwd, "readme_block.py")
        with open(script, "w") as f:
            f.write(block.source)
        # As a user runs it: no TF_CPP_MIN_LOG_LEVEL from the test session, so the block's own
        # tfpipe.quiet() must hide TensorFlow's start-up lines.
        env = {k: v for k, v in env.items() if k != "TF_CPP_MIN_LOG_LEVEL" or k in block.env}
        run = subprocess.run([sys.executable, script], capture_output=True, text=True, cwd=cwd, env=env,
                             timeout=block.timeout)
        _check(run, f"README.md:{block.line} python block")
        noise = [line for line in run.stderr.splitlines() if _TF_NOISE.search(line)]
        assert not noise, f"README.md:{block.line}: TensorFlow start-up lines on stderr: {noise[:3]}"
        return
    for command in commands(block.source):
        if any(command.startswith(prefix) for prefix in block.help_only):
            argv = shlex.split(command, comments=True)
            while argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", argv[0]):
                argv = argv[1:]  # VAR=value before the program: the environment, not the program
            if os.path.basename(argv[0]).startswith("python") and argv[1:2] != ["-m"]:
                # A repository script run with positional arguments: it must exist where the README says.
                assert os.path.isfile(os.path.join(ROOT, argv[1])), f"README.md:{block.line}: no {argv[1]}"
                continue
            shown, error = _help_text(tuple(help_command(argv)), cwd, env, block.timeout)
            missing = unknown_flags(command, shown)
            if not shown.strip() or missing:
                raise AssertionError(f"README.md:{block.line}: {command!r}: flags not in "
                                     f"`{' '.join(help_command(argv))}`: {missing or error[-2000:]}")
            continue
        _check(subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], capture_output=True, text=True,
                              cwd=cwd, env=env, timeout=block.timeout), f"README.md:{block.line}: {command!r}")


_HELP: dict = {}


def _help_text(command: tuple, cwd, env, timeout) -> tuple:
    """(stdout, stderr) of a --help command, run once per test process: 27 README commands ask
    4 programs for theirs, and each run starts TensorFlow (~5 s)."""
    if command not in _HELP:
        shown = subprocess.run(list(command), capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)
        _HELP[command] = (shown.stdout, shown.stderr)
    return _HELP[command]


with open(README, encoding="utf-8") as _f:
    _BLOCKS = [b for b in parse_blocks(_f.read()) if b.lang]


@pytest.mark.parametrize("block", _BLOCKS, ids=[f"README.md:{b.line}-{b.lang}" for b in _BLOCKS])
def test_readme_block_runs(block, tmp_path):
    if block.skip:
        pytest.skip(block.skip)
    if block.xfail:
        with pytest.raises(AssertionError):
            run_block(block, str(tmp_path))
        pytest.xfail(f"{block.xfail} (the block still fails; remove the marker once it runs)")
    run_block(block, str(tmp_path))


# --- the harness itself: it must be able to fail --------------------------------------------

_SAMPLE = """
Intro.

<!-- test: corpus data/ 2; replace 250 => 2; env X=1 -->
```bash
tfpipe synth --output out --per_class 250   # comment
ls out/tone | wc -l
```

```
sample output, not run
```

<!-- test: skip: needs a GPU -->
```python
import nothing_here
```

<!-- test: help-only tfpipe bench -->
```bash
tfpipe bench --data /nowhere --variants optimized \\
    --noprefetch --batch_size 8
```
"""


def test_markers_are_read():
    blocks = parse_blocks(_SAMPLE)
    assert [(b.lang, b.line) for b in blocks] == [("bash", 5), ("", 10), ("python", 15), ("bash", 20)]
    first, _, gpu, bench = blocks
    assert first.corpora == [("data/", 2)] and first.env == {"X": "1"}
    assert commands(first.source) == ["tfpipe synth --output out --per_class 2   # comment",
                                      "ls out/tone | wc -l"]
    assert gpu.skip == "needs a GPU" and bench.help_only == ["tfpipe bench"]
    assert commands(bench.source) == ["tfpipe bench --data /nowhere --variants optimized --noprefetch --batch_size 8"]


@pytest.mark.parametrize("marker, message", [
    ("<!-- test: skp: typo -->\n```bash\ntrue\n```", r"unknown test directive 'skp: typo'"),
    ("<!-- test: skip: x -->\n```\noutput\n```", r"a test marker above a ``` block"),
])
def test_bad_markers_fail(marker, message):
    with pytest.raises(ValueError, match=message):
        parse_blocks(marker)


def test_replace_must_match():
    block = parse_blocks("<!-- test: replace --per_class 250 => --per_class 3 -->\n```bash\ntfpipe synth\n```")[0]
    with pytest.raises(ValueError, match="replace '--per_class 250': not in the block"):
        block.source


def test_sample_blocks_run_and_fail_for_real(tmp_path):
    first, _, _, bench = parse_blocks(_SAMPLE)
    run_block(first, str(tmp_path))  # corpus + synth + ls, in tmp_path
    assert (tmp_path / "data" / "tone").is_dir() and len(os.listdir(tmp_path / "out" / "tone")) == 2
    run_block(bench, str(tmp_path))  # help-only: flags checked, nothing run
    misspelled = parse_blocks("<!-- test: help-only -->\n```bash\ntfpipe bench --noprefech --batch_sise 8\n```")[0]
    with pytest.raises(AssertionError, match=r"\['--noprefech', '--batch_sise'\]"):
        run_block(misspelled, str(tmp_path))
    failing = parse_blocks("```bash\ntfpipe synth --per_class 2\n```")[0]  # no --output
    with pytest.raises(AssertionError, match="--output is required"):
        run_block(failing, str(tmp_path))
    broken = parse_blocks("```python\nimport tfpipe\ntfpipe.no_such_name\n```")[0]
    with pytest.raises(AssertionError, match="no attribute 'no_such_name'"):
        run_block(broken, str(tmp_path))
