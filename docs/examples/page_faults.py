"""What a big batch costs when its buffers are new every time: PipelineConfig.reuse_memory on and off.

Each arm is a fresh process pinned to one core that casts a uint8 batch of 64 224x224x3 images
to float32 (38 MiB out, the last step of the image chain) in a graph loop, and reports the
median time per batch and the minor page faults per batch (getrusage). "on" calls
tfpipe.core.memory.reuse_large_buffers() first, as building a chain with reuse_memory=True
does; "off" leaves glibc's malloc as it is. Arms alternate, ROUNDS times.

    python docs/examples/page_faults.py [ROUNDS=3] [BATCHES=20]
"""

import json
import statistics
import subprocess
import sys

_ARM = """
import json, os, resource, statistics, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
from tfpipe.core import memory
tf.config.threading.set_inter_op_parallelism_threads(1)
tf.config.threading.set_intra_op_parallelism_threads(1)
if sys.argv[1] == "on":
    memory.reuse_large_buffers()
images = tf.cast(tf.random.uniform([64, 224, 224, 3], 0, 256, tf.int32), tf.uint8)
cast = tf.function(lambda x: tf.reduce_sum(tf.cast(x, tf.float32)[:, 0, 0, 0]))
cast(images)
times, faults = [], []
for _ in range(int(sys.argv[2])):
    before, start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
    cast(images).numpy()
    times.append(time.perf_counter() - start)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"ms": statistics.median(times) * 1e3, "faults": statistics.median(faults)}))
"""


def main(rounds: int = 3, batches: int = 20) -> None:
    results = {"off": [], "on": []}
    for _ in range(rounds):
        for arm in results:
            out = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", _ARM, arm, str(batches)],
                                 capture_output=True, text=True, check=True).stdout
            results[arm].append(json.loads(out.strip().splitlines()[-1]))
    for arm, runs in results.items():
        ms = statistics.median(r["ms"] for r in runs)
        faults = statistics.median(r["faults"] for r in runs)
        print(f"reuse_memory {arm:3s}: {ms:6.2f} ms per batch ({ms / 64:.3f} ms an image), "
              f"{faults:,.0f} page faults per batch")
    off, on = (statistics.median(r["ms"] for r in results[a]) for a in ("off", "on"))
    print(f"off / on: {off / on:.1f}x")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
