"""bench/advice.py: what to do about the limiting stage or op, from the reports' numbers (pure)."""

import dataclasses

from tests.bench.support import result
from tfpipe.bench.ops import OpRate, OpsReport
from tfpipe.bench.stages import StageReport

IMAGE = ("list", "read", "decode", "scale", "batch")
SHARDS = ("list", "records", "cast", "batch")
REFS = {"naive": "naive", "optimized": "naive"}


def test_decode_limited_images_are_pointed_at_prepared_shards():
    decode = StageReport("image features", (10_000.0, 5000.0, 1000.0, 800.0, 790.0), 700.0, None, 2, names=IMAGE)
    run = result({"naive": [1.0, 1.0], "optimized": [0.05, 0.05]}, REFS, stage=decode, data="/data/photos")
    (advice,) = run.stage_advice(decode)
    assert advice.startswith("decoding every example in every epoch limits it: `tfpipe prepare --input "
                             "/data/photos --output SHARDS`")
    assert "--store raw" in advice and "--shards SHARDS --variants optimized,shards" in advice
    assert run.to_dict()["stages"][0]["advice"] == [advice]


def test_decode_limited_shards_are_not_sent_to_prepare_again():
    # --data is a shard folder of JPEGs (tfpipe prepare --store jpeg): its decode limits it.
    decode = StageReport("image features", (10_000.0, 8000.0, 1000.0, 990.0), 900.0, None, 2,
                         names=("list", "records", "decode", "batch"))
    run = result({"naive": [1.0, 1.0], "optimized": [0.05, 0.05]}, REFS, stage=decode, data="/data/photo_shards")
    (advice,) = run.stage_advice(decode)
    assert "tfpipe prepare --input" not in advice and "--shards SHARDS" not in advice
    assert "/data/photo_shards holds encoded examples" in advice and "--store raw" in advice


def test_a_cast_limit_far_below_its_limit_is_explained():
    # Shards: records 0.05 ms, cast 0.1 ms an example: a limit of 20,000/s on 2 cores that the chain
    # reaches a fifth of, because un-blocking, shuffling and batching run one example at a time.
    cast = StageReport("shards", (20_000.0, 10_000.0, 5000.0, 4900.0), 4000.0, None, 2, names=SHARDS)
    run = result({"naive": [1.0, 1.0], "optimized": [0.025, 0.025]}, REFS, stage=cast)  # optimized: 4,000/s
    cast_advice, below = run.stage_advice(cast)
    assert cast_advice.startswith("the float16 -> float32 cast of the stored features is the largest stage")
    assert "tf.data's per-example steps (un-blocking, the shuffle, the batch copy)" in cast_advice
    assert below == ("optimized reaches 20% of the limit: the rest goes to work outside the stages (tf.data's "
                     "per-example steps, which run on one thread each); --ops names the op")


def _ops(parallel=False, rewrites=("map_parallelization", "map_and_batch_fusion", "inject_prefetch")):
    op = OpRate("ParallelMapDatasetV2" if parallel else "MapDataset", "slow", 500.0, parallel, 2 if parallel else 1)
    return OpsReport("input_fn", (OpRate("RangeDataset", "", 100_000.0), op, OpRate("BatchDatasetV2", "", 490.0)),
                     2, rewrites)


def test_a_sequential_user_map_beating_its_one_thread_limit_is_tfs_rewrite():
    run = result({"input_fn": [1.0, 1.0]}, {"input_fn": "input_fn"})  # 100 examples/s
    faster = dataclasses.replace(run, variants=(dataclasses.replace(
        run.variants[0], stats=dataclasses.replace(run.variants[0].stats, median=900.0)),), ops=(_ops(),))
    (advice,) = faster.ops_advice(faster.ops[0])
    assert advice.startswith('MapDataset "slow" is sequential as written, but tf.data\'s map_parallelization '
                             "rewrite is on in this chain's options (TensorFlow's default)")
    assert "the chain made 900/s, above the 503/s MapDataset \"slow\" allows on one thread" in advice  # 1.99 ms added
    assert "map_parallelization = False to time it as written" in advice
    assert "limits the pipeline" in faster.table() and "what to do: MapDataset \"slow\" is sequential" in faster.table()
    (plain,) = run.ops_advice(_ops(rewrites=()))  # options turned the rewrites off: it is just sequential
    assert plain.startswith('MapDataset "slow" runs on one thread: give it num_parallel_calls')
    (parallel,) = run.ops_advice(_ops(parallel=True))
    assert parallel.startswith('ParallelMapDatasetV2 "slow" already runs on 2 threads')


def test_stage_advice_respects_what_the_run_did():
    decode = StageReport("image features", (10_000.0, 5000.0, 1000.0, 800.0, 790.0), 700.0, None, 2, names=IMAGE)
    # With --shards the run already reads prepared shards: no "run tfpipe prepare" again.
    run = result({"naive": [1.0, 1.0], "optimized": [0.05, 0.05]}, REFS, stage=decode, data="/data/photos",
                 shards="/data/photo_shards")
    (advice,) = run.stage_advice(decode)
    assert "tfpipe prepare --input" not in advice and "--shards SHARDS" not in advice
    assert "the shards variants read /data/photo_shards" in advice and "compare their rows" in advice
    # Features limit: vectorize=true only where a tfpipe variant has it off.
    features = StageReport("audio features", (1000.0, 500.0, 250.0, 100.0, 100.0), 90.0, 120.0, 2)
    both = result({"naive": [1.0, 1.0], "optimized": [0.5, 0.5]}, REFS, stage=features)
    assert "vectorize=true runs them on whole batches" in both.stage_advice(features)[0]  # naive has it off
    vectorized = result({"optimized": [0.5, 0.5], "optimized:prefetch=false": [0.5, 0.5]},
                        {"optimized": "optimized", "optimized:prefetch=false": "optimized"}, stage=features)
    (text, *_) = vectorized.stage_advice(features)
    assert "vectorize=true" not in text and "already on whole batches (vectorize is on)" in text


def test_ops_advice_on_tfpipes_own_naive_chain_names_the_flag_not_tf_datas_argument():
    op = OpRate("MapDataset", "decode", 500.0)
    report = OpsReport("naive", (OpRate("TensorSliceDataset", "", 100_000.0), op,
                                 OpRate("BatchDatasetV2", "", 490.0)), 2, ())
    run = dataclasses.replace(result({"naive": [1.0, 1.0]}, {"naive": "naive"}), ops=(report,))
    (advice,) = run.ops_advice(report)
    assert advice.startswith('MapDataset "decode" runs on one thread because naive has parallel_map=false')
    assert "flag --parallel_map, variant naive:parallel_map=true" in advice and "num_parallel_calls" not in advice
    shuffle = OpsReport("naive", (OpRate("TensorSliceDataset", "", 100_000.0), OpRate("ShuffleDataset", "", 500.0)),
                        2, ())
    (other,) = run.ops_advice(shuffle)
    assert "fuse_maps, shuffle_filenames, vectorize are off in naive" in other
    assert "variant naive:fuse_maps=true,shuffle_filenames=true,vectorize=true" in other
    assert "num_parallel_calls" not in other
