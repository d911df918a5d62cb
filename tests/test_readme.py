"""README.md runs top to bottom, as a new user runs it, so it cannot drift from the code.

`test_the_readme_runs_top_to_bottom` copies the repository as a fresh clone has it (the files git
tracks or would track, into a new temp folder outside the repository), gives the copy a `.venv`
that stands for the one `make install` builds (it activates the venv these tests run in; the
copy's `tfpipe` package is the one imported, through PYTHONPATH, as `pip install -e .` makes it in a
real clone), and runs every ```bash and ```python block in document order in ONE bash shell in
the copy's root: a bash block as written (a `cd` carries over to the next block), a python block as
`python - <<EOF`, so the shell's working directory is the script's, as when a user pastes it. The
shell starts without the venv on PATH: the README's own `source .venv/bin/activate` has to put it
there. Nothing else is set up. The copy must then hold nothing new outside `runs/` (the tour's
scratch folder, ignored by git) but Python's `__pycache__` folders, no tracked file may change, and
no corpus or shard folder may sit inside another (read again, it would be one more class).
Fences without a language, or with another one (```text), are sample output and are not run.

An HTML comment on the line right above a fence (invisible on GitHub) marks a block that is not run:

    <!-- test: skip: REASON -->    not run, not checked (it installs or runs the whole suite)
    <!-- test: shown: REASON -->   bash: not run (it measures for minutes, needs a cloud or a
                                   cluster); every --flag it names must be in its command's
                                   --help, and a `python SCRIPT.py` must name a script of the
                                   repository

README.md says in its text which blocks are not run and why. A marker without a reason, an
unknown one, or one above a fence that is not run fails the test.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from tests.support import ROOT

README = os.path.join(ROOT, "README.md")
_RUN_LANGS = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash"}
_MARKER = re.compile(r"^<!--\s*test:(.*?)-->\s*$")
_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
_STEP = "@@tfpipe-readme-block "  # printed before each block, so a failure is traced to its line
TOUR_TIMEOUT = 900  # seconds for the whole README; it takes ~4 minutes on 2 busy cores
SCRATCH = "runs/"  # the one folder the tour may write in the repository (ignored by git)


@dataclasses.dataclass
class Block:
    """One fenced block and what its marker asks."""

    line: int  # 1-based line of the opening fence
    lang: str  # "python", "bash" or "" (not run)
    code: str
    skip: str = ""  # why it is not run
    shown: str = ""  # why it is not run; its flags are checked


def parse_blocks(text: str) -> list[Block]:
    """The fenced blocks of a markdown text with their markers read.

    Raises:
      ValueError: an unknown directive, a marker without a reason, or one above a block that is not run.
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
            _read_marker(block, marker.group(1).strip())
        blocks.append(block)
        i = end + 1
    return blocks


def _read_marker(block: Block, text: str) -> None:
    """Fills `block` from a '<!-- test: skip: REASON -->' or '<!-- test: shown: REASON -->' marker."""
    word, colon, reason = text.partition(":")
    if word.strip() not in ("skip", "shown") or not colon or not reason.strip():
        raise ValueError(f"README.md:{block.line}: unknown test marker {text!r}: write 'skip: REASON' or "
                         f"'shown: REASON' (see tests/test_readme.py)")
    if word.strip() == "shown" and block.lang != "bash":
        raise ValueError(f"README.md:{block.line}: 'shown' marks a bash block (its flags are checked); "
                         f"use 'skip: REASON' for a python block")
    setattr(block, word.strip(), reason.strip())


def commands(code: str) -> list[str]:
    """A bash block's commands: backslash continuations joined, comment-only and blank lines dropped."""
    joined = re.sub(r"\s*\\\n\s*", " ", code)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def tour_script(blocks: list[Block]) -> str:
    """One bash script that runs the blocks in order in one shell (see the module docstring)."""
    parts = ["set -e -o pipefail"]
    for b in blocks:
        if not b.lang or b.skip or b.shown:
            continue
        parts.append(f"echo '{_STEP}{b.line}'; echo '{_STEP}{b.line}' >&2")
        if b.lang == "python":
            end = f"README_BLOCK_{b.line}_END"
            parts.append(f"python - <<'{end}'\n{b.code}{end}")
        else:
            parts.append(b.code)
    return "\n".join(parts) + "\n"


_TF_NOISE = re.compile(r"cuda|cuDNN|cuFFT|cuBLAS|oneDNN|TensorRT|cpu_feature_guard")


def failed_block(stdout: str, stderr: str) -> str:
    """'README.md:LINE' of the last block that started, from the step lines the script printed."""
    lines = re.findall(re.escape(_STEP) + r"(\d+)", stdout + "\n" + stderr)
    return f"README.md:{max(map(int, lines))}" if lines else "README.md (before the first block)"


def tail_of_block(text: str, limit: int = 4000) -> str:
    """What the last block printed (the script's output after its last step line)."""
    return text.rsplit(_STEP, 1)[-1][-limit:]


def noise_lines(stderr: str) -> list[str]:
    """TensorFlow start-up lines on stderr, each with the block that printed it (tfpipe.quiet() and the
    command line hide them)."""
    found, where = [], "?"
    for line in stderr.splitlines():
        if line.startswith(_STEP):
            where = line[len(_STEP):]
        elif _TF_NOISE.search(line):
            found.append(f"README.md:{where}: {line[:200]}")
    return found


# --- the copy a new user has -------------------------------------------------------------------

def fresh_copy(dest: str) -> str:
    """The repository's files as a fresh clone has them (tracked, or untracked and not ignored: the
    working tree under test), copied to `dest` and committed there, so `git status` can tell
    what a run leaves."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = os.path.join(ROOT, rel)
        if not os.path.lexists(src):
            continue  # deleted in the working tree, not yet committed
        os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(dest, rel), follow_symlinks=False)
    git = ["git", "-c", "user.name=readme-test", "-c", "user.email=readme-test@localhost"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the repository, as cloned"]):
        subprocess.run(git + args, cwd=dest, check=True, capture_output=True)
    return dest


def stand_in_venv(copy: str) -> None:
    """`.venv/bin/activate` in the copy: it activates the venv running these tests (what `make install`
    would have built), or puts this Python's folder first on PATH where it runs outside a venv."""
    os.makedirs(os.path.join(copy, ".venv", "bin"))
    if sys.prefix != sys.base_prefix and os.path.isfile(os.path.join(sys.prefix, "bin", "activate")):
        line = f". {shlex.quote(os.path.join(sys.prefix, 'bin', 'activate'))}\n"
    else:
        line = f"export PATH={shlex.quote(os.path.dirname(sys.executable))}:\"$PATH\"\n"
    with open(os.path.join(copy, ".venv", "bin", "activate"), "w") as f:
        f.write("# stands for the .venv `make install` builds: tests/test_readme.py\n" + line)


def user_env(copy: str) -> dict:
    """A new user's shell: this machine's environment without the test session's venv on PATH or its
    settings (TF_CPP_MIN_LOG_LEVEL, PYTHONPATH), the copy's tfpipe importable (as `pip install -e .`
    makes it in a clone; the shared venv is not changed)."""
    venv_bins = {os.path.dirname(sys.executable), os.path.join(sys.prefix, "bin")}
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p not in venv_bins]
    drop = {"TF_CPP_MIN_LOG_LEVEL", "PYTHONPATH", "VIRTUAL_ENV", "PYTEST_XDIST_WORKER", "PYTEST_CURRENT_TEST"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {**env, "PATH": os.pathsep.join(path or ["/usr/bin", "/bin"]), "PYTHONPATH": copy}


def git_status(where: str, ignored: bool = False) -> set[str]:
    args = ["git", "status", "--porcelain"] + (["--ignored"] if ignored else [])
    return set(subprocess.run(args, cwd=where, capture_output=True, text=True, check=True).stdout.splitlines())


def left_behind(before: set[str], after: set[str]) -> list[str]:
    """Entries of `git status --porcelain --ignored` a run added, less the scratch folder and caches."""
    return sorted(e for e in after - before
                  if e[3:].rstrip("/") != SCRATCH.rstrip("/") and not e.rstrip("/").endswith("__pycache__"))


def nested_data_folders(root: str) -> list[str]:
    """Corpora (synth.json) and shard folders (tfpipe.json) written inside another one under `root`: read
    again, the outer one would hold one more class, or files of several domains (issue 32)."""
    found = sorted(d for d, _, files in os.walk(root) if {"synth.json", "tfpipe.json"} & set(files))
    return [f"{inner} inside {outer}" for outer in found for inner in found
            if inner.startswith(outer.rstrip(os.sep) + os.sep)]


# --- `shown` blocks: flags checked, not run -----------------------------------------------------

def help_command(argv: list[str]) -> list[str]:
    """The command that prints the --help of the program `argv` calls (tfpipe SUB, python -m MOD)."""
    if argv[0] == "tfpipe" and len(argv) > 1:
        return ["tfpipe", argv[1], "--help"]
    if os.path.basename(argv[0]).startswith("python") and argv[1:2] == ["-m"] and len(argv) > 2:
        return [argv[0], "-m", argv[2], "--help"]
    raise ValueError(f"shown: cannot find the --help of {' '.join(argv)!r} (tfpipe SUB or python -m MOD)")


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


_HELP: dict = {}


def check_shown(block: Block, repo: str, env: dict) -> None:
    """A `shown` block's commands name only flags their --help lists and scripts the repository has."""
    for command in commands(block.code):
        argv = shlex.split(command, comments=True)
        while argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", argv[0]):
            argv = argv[1:]  # VAR=value before the program: the environment, not the program
        if os.path.basename(argv[0]).startswith("python") and argv[1:2] != ["-m"]:
            assert os.path.isfile(os.path.join(repo, argv[1])), f"README.md:{block.line}: no {argv[1]}"
            continue
        key = tuple(help_command(argv))
        if key not in _HELP:  # each run starts TensorFlow (~5 s): once per program
            shown = subprocess.run(list(key), capture_output=True, text=True, cwd=repo, env=env, timeout=120)
            _HELP[key] = (shown.stdout, shown.stderr)
        text, error = _HELP[key]
        missing = unknown_flags(command, text)
        if not text.strip() or missing:
            raise AssertionError(f"README.md:{block.line}: {command!r}: flags not in `{' '.join(key)}`: "
                                 f"{missing or error[-2000:]}")


# --- the test ------------------------------------------------------------------------------------

def run_tour(blocks: list[Block], copy: str, timeout: float = TOUR_TIMEOUT) -> subprocess.CompletedProcess:
    """Runs the blocks in one shell in `copy`; AssertionError naming the block that failed."""
    run = subprocess.run(["bash", "-c", tour_script(blocks) + 'python -c "import tfpipe; print(tfpipe.__file__)"'],
                         cwd=copy, env=user_env(copy), capture_output=True, text=True, timeout=timeout)
    if run.returncode != 0:
        raise AssertionError(f"{failed_block(run.stdout, run.stderr)} failed (exit {run.returncode})\n"
                             f"--- stdout\n{tail_of_block(run.stdout)}\n--- stderr\n{tail_of_block(run.stderr)}")
    return run


def test_the_readme_runs_top_to_bottom(tmp_path):
    with open(README, encoding="utf-8") as f:
        blocks = parse_blocks(f.read())
    repo_before = git_status(ROOT)
    copy = fresh_copy(str(tmp_path / "tfpipe"))
    stand_in_venv(copy)
    before = git_status(copy, ignored=True)
    run = run_tour(blocks, copy)
    assert run.stdout.strip().splitlines()[-1] == os.path.join(copy, "tfpipe", "__init__.py")  # the copy's
    assert not noise_lines(run.stderr), noise_lines(run.stderr)[:3]
    assert git_status(copy) == git_status(copy) & before, "the README changed files git tracks"
    assert not left_behind(before, git_status(copy, ignored=True)), \
        f"the README left files outside {SCRATCH}: {left_behind(before, git_status(copy, ignored=True))}"
    assert not nested_data_folders(os.path.join(copy, SCRATCH)), nested_data_folders(os.path.join(copy, SCRATCH))
    env = {**user_env(copy), "PATH": os.path.dirname(sys.executable) + os.pathsep + user_env(copy)["PATH"]}
    for block in blocks:
        if block.shown:
            check_shown(block, copy, env)
    assert git_status(ROOT) == repo_before, "the README test changed the repository it copied"


def test_no_readme_command_writes_over_the_shipped_results():
    """Run or shown, a command's --json / --plot / --write_flagfile go to the scratch folder, never docs/."""
    with open(README, encoding="utf-8") as f:
        blocks = [b for b in parse_blocks(f.read()) if b.lang == "bash"]
    outputs = [(b.line, arg) for b in blocks for c in commands(b.code)
               for arg in re.findall(r"--(?:json|plot|write_flagfile)[= ](\S+)", c)]
    assert outputs and all(path.startswith(SCRATCH) for _, path in outputs), \
        [f"README.md:{line}: {path}" for line, path in outputs if not path.startswith(SCRATCH)]


# --- the harness itself: it must be able to fail --------------------------------------------

_SAMPLE = """
Intro.

```bash
source .venv/bin/activate
mkdir -p runs/out && cd runs   # comment
```

```
sample output, not run
```

<!-- test: skip: needs a GPU -->
```python
import nothing_here
```

```python
import os
print("in", os.path.basename(os.getcwd()))
```

<!-- test: shown: measures for minutes -->
```bash
tfpipe bench --data /nowhere --variants optimized \\
    --noprefetch --batch_size 8
```
"""


def test_markers_are_read():
    blocks = parse_blocks(_SAMPLE)
    assert [(b.lang, b.line) for b in blocks] == [("bash", 4), ("", 9), ("python", 14), ("python", 18),
                                                   ("bash", 24)]
    _, _, gpu, _, bench = blocks
    assert gpu.skip == "needs a GPU" and bench.shown == "measures for minutes"
    assert commands(bench.code) == ["tfpipe bench --data /nowhere --variants optimized --noprefetch --batch_size 8"]
    script = tour_script(blocks)
    assert "nothing_here" not in script and "tfpipe bench" not in script and "python - <<'README_BLOCK_18_END'" in script


@pytest.mark.parametrize("marker, message", [
    ("<!-- test: skp: typo -->\n```bash\ntrue\n```", r"unknown test marker 'skp: typo'"),
    ("<!-- test: skip -->\n```bash\ntrue\n```", r"unknown test marker 'skip'"),
    ("<!-- test: shown: slow -->\n```python\npass\n```", r"'shown' marks a bash block"),
    ("<!-- test: skip: x -->\n```\noutput\n```", r"a test marker above a ``` block"),
])
def test_bad_markers_fail(marker, message):
    with pytest.raises(ValueError, match=message):
        parse_blocks(marker)


def test_the_tour_shares_one_shell_and_names_the_block_that_failed(tmp_path):
    stand_in_venv(str(tmp_path))
    blocks = parse_blocks(_SAMPLE)
    run = run_tour(blocks, str(tmp_path), timeout=120)
    assert "in runs" in run.stdout  # the bash block's cd carried over to the python block
    env = {**user_env(str(tmp_path)), "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    check_shown(blocks[-1], ROOT, env)  # flags checked against `tfpipe bench --help`, nothing run
    misspelled = parse_blocks("<!-- test: shown: x -->\n```bash\ntfpipe bench --noprefech --batch_sise 8\n```")[0]
    with pytest.raises(AssertionError, match=r"\['--noprefech', '--batch_sise'\]"):
        check_shown(misspelled, ROOT, env)
    no_venv = parse_blocks("```bash\ntfpipe --help\n```")  # the venv is not on PATH until activated
    with pytest.raises(AssertionError, match=r"README.md:1 failed(.|\n)*tfpipe: command not found"):
        run_tour(no_venv, str(tmp_path), timeout=60)
    broken = parse_blocks("```bash\nsource .venv/bin/activate\n```\n\n```python\nimport tfpipe\ntfpipe.nope\n```")
    with pytest.raises(AssertionError, match=r"README.md:5 failed(.|\n)*no attribute 'nope'"):
        run_tour(broken, str(tmp_path), timeout=120)


def test_a_corpus_written_inside_another_is_found(tmp_path):
    for folder in ("data", "data/synth", "shards"):
        (tmp_path / folder).mkdir()
    (tmp_path / "data" / "synth.json").write_text("{}")
    (tmp_path / "shards" / "tfpipe.json").write_text("{}")
    assert nested_data_folders(str(tmp_path)) == []
    (tmp_path / "data" / "synth" / "synth.json").write_text("{}")
    assert nested_data_folders(str(tmp_path)) == [f"{tmp_path}/data/synth inside {tmp_path}/data"]


def test_left_behind_ignores_only_the_scratch_folder_and_caches():
    before = {"?? .venv/"}
    after = before | {"!! runs/", "!! tfpipe/core/__pycache__/", "?? model/", "!! data/"}
    assert left_behind(before, after) == ["!! data/", "?? model/"]
