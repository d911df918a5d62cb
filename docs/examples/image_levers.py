"""A/B of the image levers: tfpipe's optimized chain with each ImageConfig lever undone, against the
tensorflow/models recipe and the Keras recipe (README, "Images"; BUILD_NOTES, "Images").

Every arm yields the same output (224 x 224 train crops, float32 in [0, 1], batch 64) and runs
in its own process, all arms once per round, rounds interleaved; the table gives each arm's
median examples/s and its median ratio to the tf-models recipe within a round (so a slow
moment of the machine hits all arms of a round alike).

    python docs/examples/photo_corpus.py /tmp/photos 2000      # the corpus
    python docs/examples/image_levers.py /tmp/photos [BATCHES=30] [ROUNDS=3] [ARM,ARM,...]

Arms: tf-models, keras, optimized (tfpipe's defaults), and optimized with one lever undone:
min_crop_area=0.35, dct_method=INTEGER_ACCURATE, fancy_upscaling=true, scaled_decode=false;
also dtype=uint8 (bytes out, the model normalizes), cache=memory (a PipelineConfig field: the
encoded bytes kept in RAM after a first epoch, crops still drawn anew), reuse_memory=false
(glibc's malloc as it is: every float batch's buffers faulted in anew) and shards:DIR (a
`tfpipe prepare` folder). `tf-models:reuse_memory=true` / `keras:reuse_memory=true` run a
recipe with the process setting tfpipe's chain applies (tfpipe.core.memory), to show which
part of a difference is the allocator's.
"""

import json
import statistics
import subprocess
import sys

_ARM = """
import json, os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import dataclasses
import tfpipe
from tfpipe.domains.image.recipes import keras_recipe, tf_models_recipe
from tfpipe.core import memory
data, arm, batches = sys.argv[1], sys.argv[2], int(sys.argv[3])
config = tfpipe.ImageConfig(height=224, width=224)
pipe = tfpipe.PipelineConfig.optimized(batch_size=64, seed=0)
recipe = {"tf-models": tf_models_recipe, "keras": keras_recipe}.get(arm.split(":")[0])
if recipe:
    if arm.endswith(":reuse_memory=true"):
        memory.reuse_large_buffers()
    ds = recipe(data, config, 64, seed=0)
elif arm.startswith("shards:"):
    ds = tfpipe.build_dataset(arm[len("shards:"):], "train", pipe, features=config)
else:
    edits = dict(e.split("=") for e in arm.split(":")[1].split(",")) if ":" in arm else {}
    def typed(obj, keys):
        return {k: (v == "true") if isinstance(getattr(obj, k), bool) else type(getattr(obj, k))(v)
                for k, v in edits.items() if k in keys}
    pipe = dataclasses.replace(pipe, **typed(pipe, {f.name for f in dataclasses.fields(pipe)}))
    config = dataclasses.replace(config, **typed(config, {f.name for f in dataclasses.fields(config)}))
    ds = tfpipe.build_dataset(data, "train", pipe, features=config)
it = iter(ds)
# warm-up: tracing, AUTOTUNE, the page cache; with a cache, one whole epoch fills it first
for _ in range(5 + (len(tfpipe.find(data).paths) // 64 if "cache=" in arm else 0)):
    next(it)
start = time.perf_counter()
for _ in range(batches):
    next(it)
print(json.dumps({"examples_per_s": batches * 64 / (time.perf_counter() - start)}))
"""

ARMS = ("tf-models", "keras", "optimized", "optimized:min_crop_area=0.35",
        "optimized:dct_method=INTEGER_ACCURATE", "optimized:fancy_upscaling=true",
        "optimized:scaled_decode=false", "optimized:reuse_memory=false", "optimized:dtype=uint8",
        "tf-models:reuse_memory=true")


def run(data: str, arm: str, batches: int) -> float:
    out = subprocess.run([sys.executable, "-c", _ARM, data, arm, str(batches)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["examples_per_s"]


def main(argv):
    if not 2 <= len(argv) <= 5:
        sys.exit("usage: python docs/examples/image_levers.py PHOTO_DIR [BATCHES] [ROUNDS] [ARM,ARM,...]")
    data = argv[1]
    batches = int(argv[2]) if len(argv) > 2 else 30
    rounds = int(argv[3]) if len(argv) > 3 else 3
    arms = argv[4].split(",") if len(argv) > 4 else ARMS
    rates = {arm: [] for arm in arms}
    for r in range(rounds):
        for arm in arms:
            rates[arm].append(run(data, arm, batches))
            print(f"round {r + 1}: {arm:40s} {rates[arm][-1]:8.0f} examples/s", flush=True)
    reference = rates[arms[0]]
    print(f"\n| arm | examples/s (median) | vs {arms[0]} (median of per-round ratios) |\n|---|---|---|")
    for arm in arms:
        ratio = statistics.median(a / b for a, b in zip(rates[arm], reference))
        print(f"| {arm} | {statistics.median(rates[arm]):,.0f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main(sys.argv)
