"""What the v2 shard chain's float16 -> float32 cast costs per batch, on one core (BUILD_NOTES, "Shard formats").

Each op runs on the same [64, 101, 64] batch (a batch of one-second, 64-mel clips) 2,000 times
inside one graph while_loop, so only the op is timed (a tf.data map on one pinned core times
its own thread hand-offs instead). A float32 multiply and the window's float16 gather are shown
beside the cast. Minimum of 3 runs per op.

    taskset -c 0 python docs/examples/cast_cost.py [STEPS]
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402


def per_batch_us(op, batch, steps: int) -> float:
    """Microseconds per call of `op(batch)` in a graph loop (its output consumed, so not pruned)."""
    @tf.function(autograph=False)
    def loop(t):
        def body(i, total):
            return i + 1, total + tf.cast(tf.reduce_sum(op(t)[:, 0, 0]), tf.float32)
        return tf.while_loop(lambda i, _: i < steps, body, (tf.constant(0), tf.constant(0.0)))

    loop(batch)  # trace and warm up
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        loop(batch)
        best = min(best, (time.perf_counter() - start) / steps * 1e6)
    return best


def main(steps: int = 2000) -> None:
    values = tf.random.normal([64, 101, 64])
    half = tf.cast(values, tf.float16)
    arms = {
        "float16 -> float32 cast (the chain's)": (lambda t: tf.cast(t, tf.float32), half),
        "float32 multiply (a pass over the batch)": (lambda t: t * 1.0001, values),
        "float16 gather (the window permutation)": (lambda t: tf.gather(t, tf.random.shuffle(tf.range(64))), half),
    }
    for name, (op, batch) in arms.items():
        us = per_batch_us(op, batch, steps)
        print(f"{name:42s} {us:6.0f} us per batch = {us / 64:4.1f} us per example")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
