"""The second input_fn call with and without cache="snapshot:DIR" (README, "Measured").

Each arm runs in a fresh process that calls a train input_fn twice, as train_and_evaluate
does after an evaluation, and times the second call: until its first batch, then examples/s
over the next batches. The snapshot arm's first call wrote the snapshot.

    python docs/examples/snapshot_cache.py DATA_DIR [BATCHES] [ROUNDS]
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

_ARM = """
import os, sys, time, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tfpipe
data, cache, batches = sys.argv[1], sys.argv[2], int(sys.argv[3])
# vectorize off: the features are made before batching, so the snapshot holds log-mel, not file bytes
pipe = tfpipe.PipelineConfig.optimized(batch_size=64, seed=0, cache=cache, vectorize=False)
input_fn = tfpipe.make_input_fn(data, "train", pipe, resume=False)
def call():
    start = time.perf_counter()
    it = iter(input_fn())
    next(it)
    first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(batches):
        next(it)
    return first, batches * 64 / (time.perf_counter() - start)
call()  # the first input_fn call (writes the snapshot in the cached arm)
first, rate = call()
print(json.dumps({"first_batch_s": first, "examples_per_s": rate}))
"""


def main(data: str, batches: int = 60, rounds: int = 3) -> None:
    results = {"no cache": [], "snapshot": []}
    for _ in range(rounds):
        for arm in results:
            with tempfile.TemporaryDirectory() as tmp:
                cache = "snapshot:" + os.path.join(tmp, "snap") if arm == "snapshot" else ""
                out = subprocess.run([sys.executable, "-c", _ARM, data, cache, str(batches)],
                                     capture_output=True, text=True, check=True).stdout
                results[arm].append(json.loads(out.strip().splitlines()[-1]))
    for arm, runs in results.items():
        first = statistics.median(r["first_batch_s"] for r in runs)
        rate = statistics.median(r["examples_per_s"] for r in runs)
        print(f"{arm:9s}  second call: first batch {first:.2f} s, {rate:,.0f} examples/s (median of {rounds})")


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:]))
