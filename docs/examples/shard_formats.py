"""v1 (one Example per record) vs v2 (blocks) shard reads, pinned to 1 and 2 cores (README, "Measured").

Each arm is a fresh process pinned with taskset that iterates
build_dataset(DIR, "train", PipelineConfig.optimized(batch_size=64)) for SECONDS after a
warm-up; arms take turns in every round; medians and ratios at the end.

    python docs/examples/shard_formats.py V1_DIR V2_DIR [ROUNDS] [SECONDS]
"""

import statistics
import subprocess
import sys

_ARM = """
import os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tfpipe
ds = tfpipe.build_dataset(sys.argv[1], "train", tfpipe.PipelineConfig.optimized(batch_size=64))
it = iter(ds)
for _ in range(30):  # warm-up: threads, buffers, page cache
    next(it)
n, start = 0, time.perf_counter()
while time.perf_counter() - start < float(sys.argv[2]):
    n += int(next(it)[1].shape[0])
print(n / (time.perf_counter() - start))
"""


def main(v1: str, v2: str, rounds: int = 3, seconds: float = 3.0) -> None:
    arms = [(name, folder, cores) for cores in ("0", "0,1") for name, folder in (("v1", v1), ("v2", v2))]
    rates = {(name, cores): [] for name, _, cores in arms}
    for _ in range(rounds):
        for name, folder, cores in arms:
            out = subprocess.run(["taskset", "-c", cores, sys.executable, "-c", _ARM, folder, str(seconds)],
                                 capture_output=True, text=True, check=True).stdout
            rates[(name, cores)].append(float(out.strip().splitlines()[-1]))
    med = {arm: statistics.median(v) for arm, v in rates.items()}
    for (name, cores), value in med.items():
        print(f"{name} on {len(cores.split(','))} core(s): {value:,.0f} examples/s (median of {rounds})")
    for cores in ("0", "0,1"):
        print(f"v2 / v1 on {len(cores.split(','))} core(s): {med[('v2', cores)] / med[('v1', cores)]:.2f}x")
    for name in ("v1", "v2"):
        print(f"{name} 2 cores / 1 core: {med[(name, '0,1')] / med[(name, '0')]:.2f}x")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *(float(a) if i else int(a) for i, a in enumerate(sys.argv[3:])))
