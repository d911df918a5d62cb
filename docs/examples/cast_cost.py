"""What the v2 shard chain's float16 -> float32 cast costs per batch, on one core (BUILD_NOTES, "Shard formats").

Each arm maps one op over the same [64, 101, 64] batch (a batch of one-second, 64-mel clips)
3,000 times in a one-threaded tf.data map; the time per batch minus the identity arm's is the
op's own cost. A float32 copy and a float16 gather of the batch are shown beside the cast.

    taskset -c 0 python docs/examples/cast_cost.py [BATCHES]
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402


def per_batch_us(op, batch, batches: int) -> float:
    """Microseconds per batch of `op` in a sequential map (prefetch 1, as the chain's tail)."""
    ds = tf.data.Dataset.from_tensors(batch).repeat(batches).map(op).prefetch(1)
    start = time.perf_counter()
    for _ in ds:
        pass
    return (time.perf_counter() - start) / batches * 1e6


def main(batches: int = 3000) -> None:
    values = tf.random.normal([64, 101, 64])
    half = tf.cast(values, tf.float16)
    arms = {
        "identity (tf.data's own cost)": (lambda t: t, half),
        "float16 -> float32 cast": (lambda t: tf.cast(t, tf.float32), half),
        "float32 copy (t + 0)": (lambda t: t + 0.0, values),
        "float16 gather (the window permutation)": (lambda t: tf.gather(t, tf.random.shuffle(tf.range(64))), half),
    }
    times = {name: per_batch_us(op, batch, batches) for name, (op, batch) in arms.items()}
    base = times["identity (tf.data's own cost)"]
    for name, us in times.items():
        own = us - base
        print(f"{name:42s} {us:6.0f} us per batch, {own:5.0f} us its own = {own / 64:4.1f} us per example")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
