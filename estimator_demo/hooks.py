"""Session hooks that make a training run's input behaviour visible: throughput and input wait.

The model_fn publishes a few tensors in graph collections (`publish_step_timing`,
`publish_eval_accuracy`); the hooks here, passed to TrainSpec/EvalSpec, fetch them.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np
import tensorflow as tf

STEP_START = "tfpipe_demo/step_start"
INPUT_READY = "tfpipe_demo/input_ready"
STEP_DONE = "tfpipe_demo/step_done"
BATCH_SIZE = "tfpipe_demo/batch_size"
LOSS = "tfpipe_demo/loss"
EVAL_ACCURACY = "tfpipe_demo/eval_accuracy"
_TIMING_KEYS = (STEP_START, INPUT_READY, STEP_DONE, BATCH_SIZE, LOSS)


def publish_step_timing(features: dict, labels: tf.Tensor, train_op: tf.Operation, loss: tf.Tensor) -> None:
    """Adds the per-step timestamps InputWaitHook reads (call in the model_fn, TRAIN mode).

    `step_start` has no inputs, so the executor runs it as soon as the step begins,
    alongside the iterator's get_next; `input_ready` runs once get_next has delivered
    this step's batch; `step_done` once the train op has finished.
    """
    batch = tf.nest.flatten(features) + [labels]
    values = {STEP_START: tf.timestamp(name="step_start")}
    with tf.control_dependencies(batch):
        values[INPUT_READY] = tf.timestamp(name="input_ready")
    with tf.control_dependencies([train_op]):
        values[STEP_DONE] = tf.timestamp(name="step_done")
    values[BATCH_SIZE] = tf.shape(labels)[0]
    values[LOSS] = loss
    for key, value in values.items():
        tf.compat.v1.add_to_collection(key, value)


def publish_eval_accuracy(accuracy_value: tf.Tensor) -> None:
    """Registers the accuracy metric's value tensor for EvalReportHook (model_fn, EVAL mode)."""
    tf.compat.v1.add_to_collection(EVAL_ACCURACY, accuracy_value)


@dataclasses.dataclass
class InputWaitStats:
    """What InputWaitHook measured over the steps after warm-up.

    Attributes:
      steps: train steps measured.
      examples: training examples in those steps.
      step_seconds: in-graph time of those steps (start of the step to the end of the train op).
      wait_seconds: part of it spent before the step's batch was delivered by the input pipeline.
    """

    steps: int = 0
    examples: int = 0
    step_seconds: float = 0.0
    wait_seconds: float = 0.0

    @property
    def examples_per_second(self) -> float:
        return self.examples / self.step_seconds if self.step_seconds else 0.0

    @property
    def input_wait_share(self) -> float:
        return self.wait_seconds / self.step_seconds if self.step_seconds else 0.0


class InputWaitHook(tf.compat.v1.train.SessionRunHook):
    """Measures training examples/s and the share of step time spent waiting for input.

    How it measures (and why it is honest): in an Estimator the input pipeline's
    `get_next` runs inside every train step's session.run. The model_fn adds three
    timestamp ops to the step (`publish_step_timing`): one with no inputs, which the
    executor starts at the beginning of the step, one that waits for the batch the
    get_next returns, and one that waits for the train op. Their differences are
    this step's input wait (how long the model could not start because the batch was
    not ready) and its total time, both measured inside the graph, so hook and
    Python overheads are not charged to either side. With `prefetch` the batch is
    usually ready and the wait is near zero; without it, the whole read/decode/
    feature work of a batch happens inside the step, in front of the model. Time
    between steps (Python, other hooks, evaluations) is in neither number; the
    input pipeline's background threads do work then, which is exactly the overlap
    prefetching buys. Examples/s = examples / summed step time.

    The first `warmup_steps` are not counted: they include building the iterator and
    filling shuffle buffers, a one-off cost. Under a distribution strategy each
    replica's timestamps are combined: earliest start, latest input and end.

    Args:
      warmup_steps: steps at the start not measured.
      every_n_steps: print a progress line this often (0: never).
      report: where progress lines go (default print).
    """

    def __init__(self, warmup_steps: int = 10, every_n_steps: int = 100,
                 report: Callable[[str], None] = print):
        self._warmup = warmup_steps
        self._every = every_n_steps
        self._report = report
        self._seen = 0
        self._fetches: Optional[dict] = None
        self._global_step: Optional[tf.Tensor] = None
        self._since_report = InputWaitStats()
        self.stats = InputWaitStats()

    def begin(self):
        self._fetches = {key: tf.compat.v1.get_collection(key) for key in _TIMING_KEYS}
        missing = [key for key, values in self._fetches.items() if not values]
        if missing:
            raise ValueError(f"InputWaitHook: the model_fn did not publish {', '.join(missing)}; "
                             f"call estimator_demo.hooks.publish_step_timing in TRAIN mode")
        self._global_step = tf.compat.v1.train.get_global_step()

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs({"timing": self._fetches, "step": self._global_step})

    def after_run(self, run_context, run_values):
        self._seen += 1
        timing, step = run_values.results["timing"], run_values.results["step"]
        if self._seen <= self._warmup:
            return
        start = min(timing[STEP_START])
        step_seconds = max(timing[STEP_DONE]) - start
        wait_seconds = max(timing[INPUT_READY]) - start
        examples = int(np.sum(timing[BATCH_SIZE]))
        for stats in (self.stats, self._since_report):
            stats.steps += 1
            stats.examples += examples
            stats.step_seconds += step_seconds
            stats.wait_seconds += wait_seconds
        if self._every and self._since_report.steps >= self._every:
            recent = self._since_report
            self._report(f"step {step:>6}  loss {float(np.mean(timing[LOSS])):.3f}  "
                         f"{recent.examples_per_second:8.0f} examples/s  "
                         f"input wait {recent.input_wait_share:6.1%} of step time")
            self._since_report = InputWaitStats()


class EvalReportHook(tf.compat.v1.train.SessionRunHook):
    """Prints the accuracy at the end of each evaluation (TensorFlow's own log is silenced).

    Args:
      report: where the line goes (default print).
    """

    def __init__(self, report: Callable[[str], None] = print):
        self._report = report
        self._accuracy: Optional[tf.Tensor] = None
        self._global_step: Optional[tf.Tensor] = None
        self.history: list[tuple[int, float]] = []

    def begin(self):
        values = tf.compat.v1.get_collection(EVAL_ACCURACY)
        self._accuracy = values[0] if values else None
        self._global_step = tf.compat.v1.train.get_global_step()

    def end(self, session):
        if self._accuracy is None:
            return
        accuracy, step = session.run([self._accuracy, self._global_step])
        self.history.append((int(step), float(accuracy)))
        self._report(f"eval at step {int(step):>6}: held-out accuracy {accuracy:.3f}")
