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
