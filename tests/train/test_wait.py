"""The input-wait figures and verdict both the Estimator hook and the Keras callback report."""

import logging
import math
import subprocess
import sys

import pytest

from tfpipe.train import wait
from tfpipe.train.wait import WaitStats


def test_stats_add_up_steps_and_derive_share_rate_and_the_most_a_faster_pipeline_can_gain():
    total = WaitStats() + WaitStats(1, 32, 0.10, 0.08) + WaitStats(3, 96, 0.30, 0.02)
    assert total == WaitStats(4, 128, pytest.approx(0.40), pytest.approx(0.10))
    assert total.input_wait_share == pytest.approx(0.25)
    assert total.examples_per_second == pytest.approx(320.0)
    assert total.speedup_if_input_were_free == pytest.approx(0.40 / 0.30)
    assert WaitStats().input_wait_share == 0.0 and WaitStats().examples_per_second == 0.0
    assert math.isinf(WaitStats(1, 8, 0.5, 0.5).speedup_if_input_were_free)
    assert WaitStats(1, 1, 1.0, 2.0).input_wait_share == 1.0  # never above 1


def test_a_step_is_timed_from_the_previous_steps_end_and_waits_from_its_request():
    step = wait.step_stats(16, started=100.0, ready=100.3, requested=100.1, done=100.5)
    assert step == WaitStats(1, 16, pytest.approx(0.5), pytest.approx(0.2))
    backwards = wait.step_stats(16, started=100.0, ready=99.9, requested=100.1, done=99.0)  # the clock was set back
    assert backwards.step_seconds == 0.0 and backwards.wait_seconds == 0.0


@pytest.mark.parametrize("wait_seconds, starts, mentions", [
    (0.82, "input-bound: 82% of each step waits for data", ("5.6x faster", "tfpipe bench --dataset_fn", "--ops")),
    (0.10, "partly input-bound: 10% of each step waits", ("1.1x faster", "tfpipe bench --dataset_fn")),
    (0.01, "compute-bound: input waits 1% of each step", ("would not speed training up",)),
])
def test_verdict_names_the_bound_the_share_and_what_to_do(wait_seconds, starts, mentions):
    text = wait.verdict(WaitStats(100, 3200, 1.0, wait_seconds))
    assert text.startswith(starts), text
    for words in mentions:
        assert words in text, text
    assert "no training steps" in wait.verdict(WaitStats())


def test_on_a_cpu_only_host_the_wait_bounds_the_gain_and_the_bench_over_the_folder_measures_it():
    # The run: naive at 25.9% wait ("up to 1.4x faster") gained nothing over optimized on 2 cores.
    stats = WaitStats(100, 3200, 1.0, 0.259)
    text = wait.verdict(stats, wait.WaitContext(cpu_only=True, data="photos/"))
    assert text.startswith("input-bound: 26% of each step waits for data, but on this CPU-only host"), text
    assert "share the cores, so the wait is not idle time" in text and "1.3x is only a bound" in text
    assert "faster" not in text.replace("a faster pipeline", "")  # no promise of speed
    assert "`tfpipe bench --data photos/ --variants naive,optimized` measures" in text
    assert "--dataset_fn" not in text
    # With a GPU the wait is idle time: the bound stands, and the folder's bench command is the one given.
    gpu = wait.verdict(stats, wait.WaitContext(data="my photos/"))
    assert "steps would be up to 1.3x faster" in gpu and "`tfpipe bench --data 'my photos/' --variants " \
        "naive,optimized --ops`" in gpu and "--dataset_fn" not in gpu
    # A user's own input_fn (no folder known): their function is what to time.
    own = wait.verdict(stats, wait.WaitContext(cpu_only=True))
    assert "`tfpipe bench --dataset_fn MODULE.py:FUNCTION --variants naive,optimized` measures" in own
    assert wait.verdict(WaitStats(100, 3200, 1.0, 0.01), wait.WaitContext(cpu_only=True)).startswith("compute-bound")


def test_a_run_with_no_step_says_no_step_ran_instead_of_zero_figures():
    # A second run into a model_dir already at max_steps: the Estimator skips training, the hook never begins.
    line = wait.summary_line(WaitStats(), unmeasured=wait.why_unmeasured(False, 0, 10))
    assert line.startswith("input wait: no training step ran: training returned before it started a session")
    assert "already at max_steps" in line and "0 examples/s" not in line and "0.0%" not in line
    assert wait.why_unmeasured(True, 0, 10) == "no training step ran"
    assert "within the 10 warm-up step(s)" in wait.why_unmeasured(True, 4, 10)


def test_log_lines_carry_the_figures():
    stats = WaitStats(100, 6400, 2.0, 0.5)
    assert wait.progress_line("step 1200", stats) == \
        "step 1200: 3,200 examples/s, input wait 25.0% of step time (100 steps)"
    assert wait.summary_line(stats).startswith("input wait over 100 steps, 3,200 examples/s: input-bound: 25%")


def test_lines_go_to_the_tfpipe_logger_unless_a_report_function_is_given(caplog):
    with caplog.at_level(logging.INFO, logger="tfpipe"):
        wait.reporter(None)("a line")
    assert [r.getMessage() for r in caplog.records if r.name == "tfpipe"] == ["a line"]
    said = []
    wait.reporter(said.append)("other")
    assert said == ["other"]


def test_the_module_loads_without_tensorflow():
    code = "import sys, tfpipe.train.wait; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
