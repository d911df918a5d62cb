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
# Graph collection where tfpipe's input_fns leave the data they read, for the hook's bench command.
DATA_COLLECTION = "tfpipe_input_data"


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


@dataclasses.dataclass(frozen=True)
class WaitContext:
    """What the verdict needs to know beyond the figures: where training ran and what it read.

    Attributes:
      cpu_only: no GPU (or TPU) visible: the input pipeline and the model share the CPU cores, so
        time a step waits is not idle time, and input free of cost is no free speed-up.
      data: the folder, CSV or shard folder tfpipe's chain read ("": unknown, e.g. a user's own
        input_fn), for the `tfpipe bench` command the verdict suggests.
    """

    cpu_only: bool = False
    data: str = ""

    def bench_command(self, *, ops: bool = True) -> str:
        """The `tfpipe bench` command that times this input: over the folder, or over the user's own function."""
        import shlex

        what = f"--data {shlex.quote(self.data)} --variants naive,optimized" if self.data \
            else "--dataset_fn MODULE.py:FUNCTION --variants naive,optimized"
        return f"tfpipe bench {what}" + " --ops" * ops


def summary_line(stats: WaitStats, context: Optional[WaitContext] = None, *,
                 unmeasured: str = "") -> str:
    """The closing log line: the whole run's throughput, then the verdict.

    Args:
      stats: every step measured.
      context: where training ran and what it read (default: unknown data, an accelerator).
      unmeasured: with no step measured, why (see `why_unmeasured`).
    """
    if not stats.steps:
        return f"input wait: {unmeasured or 'no training step measured'}; nothing to report"
    return (f"input wait over {stats.steps} steps, {stats.examples_per_second:,.0f} examples/s: "
            f"{verdict(stats, context)}")


def why_unmeasured(began: bool, steps_run: int, warmup_steps: int) -> str:
    """Why no step was measured, for the closing line (a second run into a finished model_dir, most often)."""
    if not began:
        return ("no training step ran: training returned before it started a session (an Estimator whose "
                "model_dir's checkpoint is already at max_steps skips training; raise max_steps or use a new "
                "model_dir)")
    if not steps_run:
        return "no training step ran"
    return (f"no training step measured: training ended within the {warmup_steps} warm-up step(s) "
            f"(warmup_steps={warmup_steps})")


def verdict(stats: WaitStats, context: Optional[WaitContext] = None) -> str:
    """What the figures mean for the person training, in one line.

    Args:
      stats: the steps measured.
      context: where training ran (CPU only: the wait bounds the gain, `tfpipe bench` measures it)
        and what it read (a folder: the bench command over it; else over the user's own function).

    Returns:
      "input-bound: ...", "partly input-bound: ..." or "compute-bound: ...", with the share,
      what a faster pipeline could gain and how to find the slow op.
    """
    context = context or WaitContext()
    if not stats.steps:
        return "no training steps measured (no step ran, or training ended within the warm-up steps)"
    share = stats.input_wait_share
    if share < COMPUTE_BOUND_SHARE:
        return (f"compute-bound: input waits {share:.0%} of each step; a faster input pipeline "
                f"would not speed training up")
    bound = "input-bound" if share >= INPUT_BOUND_SHARE else "partly input-bound"
    speedup = stats.speedup_if_input_were_free
    if context.cpu_only:
        return (f"{bound}: {share:.0%} of each step waits for data, but on this CPU-only host (no GPU visible) "
                f"the input pipeline and the model share the cores, so the wait is not idle time: a faster "
                f"pipeline also takes cores from the model, and {speedup:.1f}x is only a bound on the gain; "
                f"the real gain is what `{context.bench_command(ops=False)}` measures (--ops names the slow op)")
    gain = f"with input free, steps would be up to {speedup:.1f}x faster"
    return f"{bound}: {share:.0%} of each step waits for data ({gain}); time the pipeline with " \
           f"`{context.bench_command()}` to find the slow op"


def cpu_only() -> bool:
    """No GPU or TPU visible to TensorFlow (imported here, when a hook starts: this module stays TensorFlow-free)."""
    import tensorflow as tf

    return not any(tf.config.list_physical_devices(kind) for kind in ("GPU", "TPU"))


def reporter(report: Optional[Callable[[str], None]]) -> Callable[[str], None]:
    """`report`, or INFO lines on the 'tfpipe' logger (`logging.basicConfig(level=logging.INFO)` shows them)."""
    return report if report is not None else _LOG.info
