"""What InputWaitHook / InputWaitCallback cost a training step (README, "Is my training waiting on input?").

The same model trains with and without the hook (Estimator) or callback (Keras fit), arms
taking turns round by round in one process, on in-memory input (free, so only the model
and the measuring remain). A bare clock (a hook / callback that only records when each
step ended) is in both arms; the figure is the median step time with the tool over the
median without it, per round, then the median of the rounds. Two models: "small"
(a ~1 ms CPU step, the worst case: fixed per-step costs weigh most there) and "large".

    python docs/examples/wait_overhead.py [ROUNDS] [STEPS]
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfpipe.train.estimator import InputWaitHook  # noqa: E402
from tfpipe.train.keras import InputWaitCallback  # noqa: E402

BATCH, WIDTH = 64, 256
MODELS = {"small": (256,), "large": (2048, 2048)}


def _data():
    x = np.random.default_rng(0).random((BATCH, WIDTH), np.float32)
    return tf.data.Dataset.from_tensors((x, np.arange(BATCH) % 10)).repeat().prefetch(2)


class _Clock(tf.compat.v1.train.SessionRunHook):
    def __init__(self):
        self.times = []

    def after_run(self, run_context, run_values):
        self.times.append(time.perf_counter())


def _median_step(times):
    return statistics.median(np.diff(times[len(times) // 10:]))  # the first tenth is warm-up


def estimator_step(hidden, steps, measured, model_dir):
    """Median seconds per Estimator train step, with or without InputWaitHook."""
    def model_fn(features, labels, mode):
        x = features
        for width in hidden:
            x = tf.keras.layers.Dense(width, activation="relu")(x)
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, tf.keras.layers.Dense(10)(x))
        train_op = tf.compat.v1.train.AdamOptimizer(1e-4).minimize(loss, tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    clock = _Clock()
    config = tf.estimator.RunConfig(model_dir=model_dir, log_step_count_steps=None, save_checkpoints_steps=None,
                                    save_checkpoints_secs=None)
    hooks = [clock] + ([InputWaitHook()] if measured else [])
    tf.estimator.Estimator(model_fn, config=config).train(_data, steps=steps, hooks=hooks)
    return _median_step(clock.times)


def keras_step(hidden, steps, measured):
    """Median seconds per Keras fit step, with or without InputWaitCallback."""
    layers = [tf.keras.layers.Dense(w, activation="relu") for w in hidden] + [tf.keras.layers.Dense(10)]
    model = tf.keras.Sequential([tf.keras.Input([WIDTH])] + layers)
    model.compile(tf.keras.optimizers.Adam(1e-4), tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    times = []
    clock = tf.keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: times.append(time.perf_counter()))
    callbacks = [clock] + ([InputWaitCallback(report=lambda line: None)] if measured else [])
    model.fit(_data(), epochs=1, steps_per_epoch=steps, verbose=0, callbacks=callbacks)
    return _median_step(times)


def main(rounds: int = 5, steps: int = 400) -> None:
    print(f"{'arm':28s} {'step (without)':>15s} {'step (with)':>12s} {'overhead':>9s}   (medians of {rounds} rounds)")
    with tempfile.TemporaryDirectory() as tmp:
        for name, hidden in MODELS.items():
            for framework in ("estimator", "keras"):
                without, with_tool, ratios = [], [], []
                for r in range(rounds):
                    def run(measured):
                        if framework == "estimator":
                            return estimator_step(hidden, steps, measured, os.path.join(tmp, f"{name}-{r}-{measured}"))
                        return keras_step(hidden, steps, measured)
                    pair = (run(False), run(True)) if r % 2 == 0 else tuple(reversed((run(True), run(False))))
                    without.append(pair[0])
                    with_tool.append(pair[1])
                    ratios.append(pair[1] / pair[0])
                print(f"{framework + ' / ' + name + ' model':28s} {statistics.median(without) * 1e3:12.3f} ms "
                      f"{statistics.median(with_tool) * 1e3:9.3f} ms {statistics.median(ratios) - 1:+9.1%}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
