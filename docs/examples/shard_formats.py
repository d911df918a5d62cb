"""v1 (one Example per record) vs v2 (blocks) shard reads, pinned to 1 and 2 cores (README, "Measured").

Each arm is a fresh process pinned with taskset that iterates
build_dataset(DIR, "train", PipelineConfig.optimized(batch_size=64, **fields)) for SECONDS after a
warm-up; arms take turns in every round; medians and ratios at the end. The arms: v1; v2 as
tfpipe reads it by default (blocks shuffled whole, permuted per window, re-cut into batches);
v2 with the example-level shuffle (shuffle_blocks=False: un-block, then a shuffle buffer); and
"v2 read+parse": the v2 records read (parallel interleave) and parsed into blocks with nothing
after them (no shuffle, batch or cast), the most any chain over these files can yield here.

    python docs/examples/shard_formats.py V1_DIR V2_DIR [ROUNDS] [SECONDS] [CORE_SETS]

CORE_SETS: the taskset core lists to compare, ';'-separated (default "0;0,1": 1 and 2 cores;
on a 16-core host e.g. "0-3;0-15").
"""

import statistics
import subprocess
import sys

_ARM = """
import os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tfpipe
import tensorflow as tf
if sys.argv[3] == "read_only":
    source = tfpipe.find(sys.argv[1]).chain_input("train")
    blocks = source.files.repeat().interleave(source.expand, cycle_length=len(os.sched_getaffinity(0)),
                                              num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
    it = iter(blocks.prefetch(tf.data.AUTOTUNE))
else:
    fields = dict(f.split("=") for f in sys.argv[3].split(",") if f)
    pipe = tfpipe.PipelineConfig.optimized(batch_size=64, **{k: v == "true" for k, v in fields.items()})
    it = iter(tfpipe.build_dataset(sys.argv[1], "train", pipe))
for _ in range(30):  # warm-up: threads, buffers, page cache
    next(it)
n, start = 0, time.perf_counter()
while time.perf_counter() - start < float(sys.argv[2]):
    n += int(next(it)[1].shape[0])
print(n / (time.perf_counter() - start))
"""


def _count(cores: str) -> int:
    """How many cores a taskset list names ("0-3,8" -> 5)."""
    return sum(int(b) - int(a) + 1 if "-" in part else 1
               for part in cores.split(",") for a, _, b in [part.partition("-")])


def main(v1: str, v2: str, rounds: int = 3, seconds: float = 3.0, core_sets: str = "0;0,1") -> None:
    kinds = (("v1", v1, ""), ("v2", v2, ""), ("v2 example shuffle", v2, "shuffle_blocks=false"),
             ("v2 read+parse", v2, "read_only"))
    sets = core_sets.split(";")
    arms = [(name, folder, fields, cores) for cores in sets for name, folder, fields in kinds]
    rates = {(name, cores): [] for name, _, _, cores in arms}
    for _ in range(rounds):
        for name, folder, fields, cores in arms:
            out = subprocess.run(["taskset", "-c", cores, sys.executable, "-c", _ARM, folder, str(seconds), fields],
                                 capture_output=True, text=True, check=True).stdout
            rates[(name, cores)].append(float(out.strip().splitlines()[-1]))
    med = {arm: statistics.median(v) for arm, v in rates.items()}
    for (name, cores), value in med.items():
        print(f"{name} on {_count(cores)} core(s): {value:,.0f} examples/s (median of {rounds})")
    for cores in sets:
        for name in ("v2", "v2 example shuffle", "v2 read+parse"):
            print(f"{name} / v1 on {_count(cores)} core(s): {med[(name, cores)] / med[('v1', cores)]:.2f}x")
    for name, _, _ in kinds:
        print(f"{name} {_count(sets[-1])} cores / {_count(sets[0])}: {med[(name, sets[-1])] / med[(name, sets[0])]:.2f}x")


if __name__ == "__main__":
    kinds = (int, float, str)
    main(sys.argv[1], sys.argv[2], *(kind(a) for kind, a in zip(kinds, sys.argv[3:])))
