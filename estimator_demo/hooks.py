"""The eval report: the held-out accuracy printed after each evaluation.

The model_fn registers its accuracy tensor (`publish_eval_accuracy`); EvalReportHook,
passed to EvalSpec, prints it. Throughput and input wait come from the library's
`tfpipe.estimator.InputWaitHook`, which needs nothing from the model_fn.
"""

from __future__ import annotations

from typing import Callable, Optional

import tensorflow as tf

EVAL_ACCURACY = "tfpipe_demo/eval_accuracy"


def publish_eval_accuracy(accuracy_value: tf.Tensor) -> None:
    """Registers the accuracy metric's value tensor for EvalReportHook (model_fn, EVAL mode)."""
    tf.compat.v1.add_to_collection(EVAL_ACCURACY, accuracy_value)


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
