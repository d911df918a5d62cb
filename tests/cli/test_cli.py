"""The `tfpipe` command line as a user meets it: usage, flag errors, help, quiet logs (real subprocesses)."""

import os
import re
import subprocess
import sys

import pytest

from tests.support import ROOT, SAYS_IF_TF_LOADED
# A TensorFlow C++ log line: "2026-11-23 03:35:03.128254: I tensorflow/core/util/port.cc:113] ..."
_CPP_LOG = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] ", re.M)


def _env(**extra):
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra}
    return {k: v for k, v in env.items() if v is not None}


def _tfpipe(*args, **env):
    return subprocess.run([sys.executable, "-m", "tfpipe.cli", *args], capture_output=True, text=True,
                          timeout=120, env=_env(**env), cwd=ROOT)


def _one_error_line(run, prog):
    """The run failed with exit 2 and exactly one 'PROG: error: ...; see PROG --help' line."""
    assert run.returncode == 2, (run.returncode, run.stderr)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(f"{prog}: error: ") and lines[0].endswith(f"; see {prog} --help"), lines[0]
    assert "FATAL" not in run.stderr and "Traceback" not in run.stderr
    return lines[0]


def test_bare_tfpipe_prints_usage_to_stderr_and_exits_2():
    run = _tfpipe()
    assert run.returncode == 2
    assert run.stdout == "" and run.stderr.startswith("usage: tfpipe SUBCOMMAND")
    for command in ("synth", "prepare", "inspect", "bench", "serve"):
        assert f"  {command} " in run.stderr


def test_help_exits_0_with_usage_on_stdout():
    run = _tfpipe("--help")
    assert run.returncode == 0 and run.stdout.startswith("usage: tfpipe SUBCOMMAND")


def test_unknown_subcommand_is_one_line_and_usage():
    run = _tfpipe("trian")
    assert run.returncode == 2
    first, rest = run.stderr.split("\n", 1)
    assert first == "tfpipe: error: unknown subcommand 'trian' (one of synth, prepare, inspect, bench, serve)"
    assert "usage: tfpipe SUBCOMMAND" in rest


@pytest.mark.parametrize("args, prog, message", [
    (["synth"], "tfpipe synth",
     r"--output is required: folder to write the corpus to \(one subfolder per class\)"),
    (["prepare", "--input", "wavs"], "tfpipe prepare", r"--output is required: shard folder to write"),
    (["bench", "--batch_size", "0"], "tfpipe bench", r"--batch_size=0: 0 is not an integer in the range \[1, "),
    (["bench", "--batch_sise=3"], "tfpipe bench", r"unknown flag --batch_sise \(did you mean --batch_size\?\)"),
    (["bench", "--output", "foo"], "tfpipe bench",
     r"--output=foo: value should be one of <log_mel\|waveform> \(--output is the old name of --features\)"),
    (["serve", "bench", "--fmax", "9000"], "tfpipe serve",
     r"AudioConfig\.fmax=9000\.0: must be in \(0\.0, 8000\.0\] .*\(from --fmax=9000\.0\)"),
    (["synth", "--output", "x", "extra"], "tfpipe synth", r"unexpected arguments extra"),
    (["synth", "--output", "x", "--domain", "text"], "tfpipe synth", r"--domain=text: allowed values are audio, image"),
    (["synth", "--output", "x", "--domain", "image", "--sample_rate", "8000"], "tfpipe synth",
     r"--sample_rate: not used by the image corpus \(it takes --size\)"),
    (["synth", "--output", "x", "--size", "32,64"], "tfpipe synth",
     r"--size: not used by the audio corpus \(it takes --sample_rate, --clip_seconds\)"),
    (["synth", "--output", "x", "--domain", "image", "--size", "64"], "tfpipe synth",
     r"--size=64: expected two sizes in pixels, smallest,largest"),
])
def test_a_bad_command_line_is_one_clean_line_and_exit_2(args, prog, message):
    line = _one_error_line(_tfpipe(*args), prog)
    assert re.search(f"{prog}: error: {message}", line), line


def test_help_shows_defaults_and_the_features_flag():
    bench = _tfpipe("bench", "--help")
    assert bench.returncode == 0, bench.stderr
    text = re.sub(r"\s+", " ", bench.stdout)  # absl wraps help lines
    assert "--batch_size: Examples per batch. (default: 64; PipelineConfig.batch_size)" in text
    assert "--[no]prefetch: prefetch(AUTOTUNE) at the end of the chain. (default: true; naive preset: false;" in text
    assert "--sample_rate: Sample rate in Hz. (default: 16000;" in text
    assert "--n_mels: Number of mel bands. (default: 64;" in text
    assert "--features: <log_mel|waveform>:" in text and "--output: Alias for --features." in text
    assert "unset: the preset's value" not in text
    prepare = _tfpipe("prepare", "--help")  # --output is the folder there, --store picks the features
    assert prepare.returncode == 0, prepare.stderr
    assert "--output: Shard folder to write" in prepare.stdout and "--features" not in prepare.stdout


@pytest.mark.parametrize("command", ["synth", "prepare", "inspect", "bench", "serve"])
def test_help_of_every_subcommand_opens_with_its_usage_and_lists_tfpipe_flags_only(command):
    run = _tfpipe(command, "--help")
    assert run.returncode == 0 and run.stdout.startswith(f"usage: tfpipe {command}"), run.stderr[-2000:]
    names = re.findall(r"^\s*--(?:\[no\])?(\w+)", run.stdout, re.M)
    assert names and not [n for n in names if n.startswith(("pfor", "tpu", "tensor_tracer", "xla"))]


@pytest.mark.parametrize("args", [["synth", "--help"], ["prepare", "--help"], ["inspect", "--help"],
                                  ["bench", "--help"], ["serve", "--help"], ["bench", "--batch_sise=3"],
                                  ["prepare", "--input", "x"]])
def test_help_and_flag_errors_answer_without_starting_tensorflow(args):
    # The flags are the configs' dataclasses; TensorFlow (~5 s to load) starts only for the work.
    run = subprocess.run([sys.executable, "-c", SAYS_IF_TF_LOADED, *args], capture_output=True, text=True,
                         timeout=120, env=_env(), cwd=ROOT)
    assert run.returncode in (0, 2) and run.stderr.strip().endswith("tensorflow not loaded"), run.stderr[-2000:]


@pytest.mark.parametrize("domain", ["audio", "image"])
def test_synth_writes_its_corpus_without_starting_tensorflow(domain, tmp_path):
    # Writing wavs or images needs numpy, soundfile and Pillow: `tfpipe synth` starts in a second.
    out = tmp_path / domain
    run = subprocess.run([sys.executable, "-c", SAYS_IF_TF_LOADED, "synth", "--domain", domain, "--output",
                          str(out), "--per_class", "1"], capture_output=True, text=True, timeout=120, env=_env(),
                         cwd=ROOT)
    assert run.returncode == 0 and run.stderr.strip().endswith("tensorflow not loaded"), run.stderr[-2000:]
    assert run.stdout.startswith(f"8 {domain} files (8 classes x 1: ") and len(list(out.glob("*/*"))) == 8


def test_help_read_by_head_ends_quietly():
    run = subprocess.run(f"{sys.executable} -m tfpipe.cli bench --help | head -1", shell=True, capture_output=True,
                         text=True, timeout=120, env=_env(), cwd=ROOT)
    assert run.stdout.startswith("usage: tfpipe bench") and "Traceback" not in run.stderr, run.stderr[-2000:]


def test_a_bench_run_takes_the_old_feature_flag_name(tmp_path):
    # --output=waveform (alias of --features) reaches the config: a 1-batch waveform bench on 8 clips.
    corpus, out = str(tmp_path / "c"), tmp_path / "bench.json"
    assert _tfpipe("synth", "--output", corpus, "--per_class", "1").returncode == 0
    run = _tfpipe("bench", "--data", corpus, "--variants", "optimized", "--output=waveform", "--batch_size", "4",
                  "--batches", "1", "--warmup", "0", "--repeats", "1", "--nostages", "--noprogress",
                  "--json", str(out))
    assert run.returncode == 0, run.stderr[-2000:]
    assert '"output": "waveform"' in out.read_text()


def test_synth_writes_an_image_corpus_the_image_domain_reads(tmp_path):
    out = tmp_path / "images"
    run = _tfpipe("synth", "--domain", "image", "--output", str(out), "--per_class", "2", "--size", "24,40")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith("16 image files (8 classes x 2: checker, circle, ") and "size=24-40" in run.stdout
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.name != "synth.json")
    assert len(files) == 16 and {f.split("/")[0] for f in files} == {
        "checker", "circle", "cross", "ring", "square", "stripes_h", "stripes_v", "triangle"}
    assert all(f.endswith((".jpg", ".png")) for f in files)
    from PIL import Image

    sizes = [Image.open(out / f).size for f in files]
    assert all(24 <= side <= 40 for size in sizes for side in size) and len(set(sizes)) > 1  # mixed sizes
    from tfpipe.core.source import find

    source = find(str(out))
    assert (source.domain, source.num_examples) == ("image", 16)
    audio = _tfpipe("synth", "--output", str(tmp_path / "clips"), "--per_class", "1", "--clip_seconds", "0.5")
    assert audio.returncode == 0, audio.stderr[-2000:]  # --domain audio is the default
    assert audio.stdout.startswith("8 audio files") and find(str(tmp_path / "clips")).domain == "audio"


def test_estimator_demo_help_still_works():
    run = subprocess.run([sys.executable, "-m", "estimator_demo", "--help"], capture_output=True, text=True,
                         timeout=120, env=_env(), cwd=ROOT)
    assert "Traceback" not in run.stderr, run.stderr[-2000:]  # absl's --help exits 1 by design
    assert "--features: <log_mel|waveform>" in run.stdout and "--output: Alias for --features." in run.stdout


# --- tfpipe.quiet: TensorFlow's start-up noise in a user's own script -------------------------

_SCRIPT = """
import tfpipe
{quiet}
import tensorflow as tf
tf.constant(1)
tf.get_logger().warning("python-side tensorflow warning")
"""


@pytest.mark.parametrize("quiet", [True, False])
def test_quiet_hides_tensorflow_start_up_logs_in_a_user_script(tmp_path, quiet):
    script = tmp_path / "train.py"
    script.write_text(_SCRIPT.format(quiet="tfpipe.quiet()" if quiet else ""))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         env=_env(TF_CPP_MIN_LOG_LEVEL=None), cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    if quiet:
        assert not _CPP_LOG.search(run.stderr), run.stderr
        assert "python-side tensorflow warning" not in run.stderr
    else:  # the noise the user would otherwise see, e.g. oneDNN and "Unable to register cuDNN factory"
        assert _CPP_LOG.search(run.stderr), run.stderr
        assert "python-side tensorflow warning" in run.stderr


def test_quiet_leaves_a_users_log_level_alone_and_checks_its_argument():
    code = ("import os, logging, tfpipe; tfpipe.quiet(); "
            "print(os.environ['TF_CPP_MIN_LOG_LEVEL'], logging.getLogger('tensorflow').level)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=_env(TF_CPP_MIN_LOG_LEVEL="0"))
    assert run.stdout.split() == ["0", "0"], run.stderr  # TF_CPP_MIN_LOG_LEVEL=0: the user wants every line
    run = subprocess.run([sys.executable, "-c", code.replace("quiet()", "quiet(level=2)")], capture_output=True,
                         text=True, timeout=60, env=_env(TF_CPP_MIN_LOG_LEVEL=None))
    assert run.stdout.split() == ["2", str(40)], run.stderr  # ERROR
    bad = subprocess.run([sys.executable, "-c", "import tfpipe; tfpipe.quiet(level=5)"], capture_output=True,
                         text=True, timeout=60, env=_env())
    assert bad.returncode != 0 and "TF_CPP_MIN_LOG_LEVEL must be 0, 1, 2 or 3" in bad.stderr


def test_help_describes_the_registered_domains_not_one_of_them():
    # Issue 32: `tfpipe --help` said synth writes audio only and `prepare --help` called --input a "Wav folder".
    from tfpipe.core import registry

    domains = registry.domains().values()
    usage = _tfpipe("--help").stdout
    synth = next(line for line in usage.splitlines() if line.strip().startswith("synth "))
    assert all(d.name in synth for d in domains if d.corpus), synth
    prepare = next(line for line in usage.splitlines() if line.strip().startswith("prepare "))
    assert all(ext in prepare for d in domains for ext in d.extensions), prepare
    text = re.sub(r"\s+", " ", _tfpipe("prepare", "--help").stdout)
    given = re.search(r"--input: (.*?)--", text).group(1)
    assert "wav folder" not in given.lower() and all(ext in given for d in domains for ext in d.extensions), given
    store = re.search(r"--store: <([^>]*)>", text).group(1).split("|")
    assert store == list(dict.fromkeys(s for d in domains for s in d.stores()))
    synth_help = re.sub(r"\s+", " ", _tfpipe("synth", "--help").stdout)
    assert all(f"{d.name} ({d.corpus.about})" in synth_help for d in domains if d.corpus), synth_help
