"""bench/flagfile.py: `tfpipe bench --write_flagfile F` writes the fastest tfpipe variant as absl flags that
the estimator_demo's flags (tfpipe.flags) read back to the same PipelineConfig and feature config."""

import dataclasses
import datetime
import os
import re
import subprocess
import sys

import pytest
from absl import flags

from tests.bench.conftest import FEAT
from tests.bench.support import result
from tfpipe import flags as tfpipe_flags
from tfpipe.bench import flagfile
from tfpipe.config import PipelineConfig
from tfpipe.domains.audio.config import AudioConfig

TFPIPE = os.path.join(os.path.dirname(sys.executable), "tfpipe")


def _demo_flags(path):
    """The FlagValues estimator_demo defines, parsed from `--flagfile=path`."""
    from estimator_demo.train import define_flags

    values = flags.FlagValues()
    define_flags(values)
    values(["estimator_demo", f"--flagfile={path}"])
    return values


def test_the_flagfile_of_a_run_reads_back_to_the_winners_configs(tmp_path):
    run = result({"naive": [1.0, 1.0, 1.0], "optimized:vectorize=false,batch_size=16,cache=memory": [0.5] * 3},
                 {"naive": "naive", "optimized:vectorize=false,batch_size=16,cache=memory": "naive"}, repeats=3)
    best = run.variants[1]
    path = tmp_path / "best.flags"
    assert flagfile.write_flagfile(run, str(path)) is best
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# tfpipe bench --write_flagfile: optimized:vectorize=false,batch_size=16,cache="
                               "memory, 200 examples/s, data /data")
    assert re.match(r"# machine: \d+ cores \(\d+ usable\), no GPU, TF 2\.15\.1, linux; \d{4}-\d\d-\d\d$", lines[1])
    assert lines[2].startswith("# winner: optimized:vectorize=false")
    assert f"# train with it: python -m estimator_demo --flagfile={path} --data /data" in lines
    assert "--pipeline=optimized" in lines and "--novectorize" in lines and "--prefetch" in lines
    assert "--batch_size=16" in lines and "--cache=memory" in lines and "--features=log_mel" in lines
    assert all(line.startswith(("#", "--")) for line in lines)
    values = _demo_flags(path)
    assert tfpipe_flags.pipeline_config(values) == PipelineConfig(**best.config["pipeline"])
    assert tfpipe_flags.feature_config(values) == AudioConfig(**best.config["features"])


def test_a_reference_recipe_that_won_is_named_and_tfpipes_best_is_written(tmp_path):
    refs = {"naive": "naive", "optimized": "naive", "keras": "naive"}
    run = result({"naive": [1.0] * 3, "optimized": [0.5] * 3, "keras": [0.4, 0.41, 0.39]}, refs, repeats=3)
    run = dataclasses.replace(run, variants=run.variants[:2] + (dataclasses.replace(run.variants[2], kind="keras"),))
    text = flagfile.flagfile_text(run, today=datetime.date(2026, 1, 2))
    assert "; 2026-01-02" in text.splitlines()[1]
    assert "# the reference recipe keras was faster than tfpipe's best; these flags are tfpipe's best variant, " \
           "optimized" in text
    assert "--pipeline=optimized" in text and "--vectorize" in text
    only_recipes = dataclasses.replace(run, variants=run.variants[2:])
    with pytest.raises(ValueError, match="no variant of this run is tfpipe's chain"):
        flagfile.flagfile_text(only_recipes)


def test_bench_write_flagfile_from_a_short_run_trains_the_demo_with_the_same_configs(tiny, tmp_path):
    path = tmp_path / "best.flags"
    done = subprocess.run([TFPIPE, "bench", "--noprogress", "--data", tiny, "--variants", "naive,optimized",
                           "--batch_size", "4", "--clip_seconds", "0.25", "--n_mels", "32", "--batches", "1",
                           "--repeats", "2", "--warmup", "0", "--nostages", "--noceiling",
                           "--write_flagfile", str(path)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"wrote {path} (" in done.stdout and f"python -m estimator_demo --flagfile={path}" in done.stdout
    written = next(line for line in path.read_text().splitlines() if line.startswith("# tfpipe bench"))
    name = written.split(": ", 1)[1].split(",")[0]
    assert name in ("naive", "optimized")  # whichever was faster on this machine now
    values = _demo_flags(path)
    expected = PipelineConfig.preset(name, batch_size=4)
    assert tfpipe_flags.pipeline_config(values) == expected
    assert tfpipe_flags.feature_config(values) == dataclasses.replace(FEAT, n_mels=32)
