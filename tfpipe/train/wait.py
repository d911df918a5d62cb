"""Is training waiting on input? The figures and the verdict, shared by the Estimator hook and the Keras callback.

Framework-free and TensorFlow-free: `tfpipe.estimator.InputWaitHook` and
`tfpipe.keras.InputWaitCallback` measure each step's wait in their own way and add
their steps up here, so both report the same figures and the same verdict.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Callable, Optional

_LOG = logging.getLogger("tfpipe")

# Below this share, a faster input pipeline cannot speed training up by more than ~5%.
COMPUTE_BOUND_SHARE = 0.05
# From this share on, the input pipeline is what limits training.
INPUT_BOUND_SHARE = 0.25


@dataclasses.dataclass(frozen=True)
class WaitStats:
    """Training steps measured, and how much of their time waited for the input pipeline.

    Attributes:
      steps: training steps measured (warm-up steps are not).
      examples: training examples in those steps (all replicas).
      step_seconds: wall time of those steps, as the training loop lives it.
      wait_seconds: the part of it the steps spent waiting for their batch.
    """

    steps: int = 0
    examples: int = 0
    step_seconds: float = 0.0
    wait_seconds: float = 0.0

    @property
    def input_wait_share(self) -> float:
        """wait_seconds / step_seconds: 0 when input is never late, 1 when steps only wait."""
        return min(1.0, self.wait_seconds / self.step_seconds) if self.step_seconds > 0 else 0.0

    @property
    def examples_per_second(self) -> float:
        return self.examples / self.step_seconds if self.step_seconds > 0 else 0.0

    @property
    def speedup_if_input_were_free(self) -> float:
        """The most a faster pipeline could gain: step time without the wait (Amdahl)."""
        rest = self.step_seconds - self.wait_seconds
        return self.step_seconds / rest if rest > 0 else float("inf")

    def __add__(self, other: "WaitStats") -> "WaitStats":
        return WaitStats(self.steps + other.steps, self.examples + other.examples,
                         self.step_seconds + other.step_seconds, self.wait_seconds + other.wait_seconds)


def step_stats(examples: int, started: float, ready: float, requested: float, done: float) -> WaitStats:
    """One step: its wait is from `requested` (the batch asked for) to `ready` (delivered);
    its time from `started` (the end of the previous step's bookkeeping) to `done`.
    All are seconds on one clock; a clock step backwards counts as zero, never negative."""
    return WaitStats(1, int(examples), max(0.0, done - started), max(0.0, ready - requested))


def progress_line(where: str, stats: WaitStats) -> str:
    """The periodic log line ("step 1200", "epoch 3"): throughput and wait share of the steps since the last one."""
    return (f"{where}: {stats.examples_per_second:,.0f} examples/s, input wait "
            f"{stats.input_wait_share:.1%} of step time ({stats.steps} steps)")


def summary_line(stats: WaitStats) -> str:
    """The closing log line: the whole run's throughput, then the verdict."""
    return f"input wait over {stats.steps} steps, {stats.examples_per_second:,.0f} examples/s: {verdict(stats)}"


def verdict(stats: WaitStats) -> str:
    """What the figures mean for the person training, in one line.

    Returns:
      "input-bound: ...", "partly input-bound: ..." or "compute-bound: ...", with the share,
      what a faster pipeline could gain and how to find the slow op.
    """
    if not stats.steps:
        return "no training steps measured (training ended within the warm-up steps)"
    share = stats.input_wait_share
    if share < COMPUTE_BOUND_SHARE:
        return (f"compute-bound: input waits {share:.0%} of each step; a faster input pipeline "
                f"would not speed training up")
    gain = f"with input free, steps would be up to {stats.speedup_if_input_were_free:.1f}x faster"
    find_it = "time the pipeline with `tfpipe bench --dataset_fn MODULE.py:FUNCTION --ops` to find the slow op"
    if share < INPUT_BOUND_SHARE:
        return f"partly input-bound: {share:.0%} of each step waits for data ({gain}); {find_it}"
    return f"input-bound: {share:.0%} of each step waits for data ({gain}); {find_it}"


def reporter(report: Optional[Callable[[str], None]]) -> Callable[[str], None]:
    """`report`, or INFO lines on the 'tfpipe' logger (`logging.basicConfig(level=logging.INFO)` shows them)."""
    return report if report is not None else _LOG.info
