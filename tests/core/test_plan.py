"""The chain plan: which steps run in which order, decided without TensorFlow."""

import dataclasses
import subprocess
import sys

import pytest

from tfpipe.config import TOGGLES, PipelineConfig
from tfpipe.core import plan as plan_lib
from tfpipe.core.plan import Request, Yields, describe, plan
from tfpipe.core.stage import Stage

OPT, NAIVE = PipelineConfig.optimized(), PipelineConfig.naive()


def _fn(*element):
    return element


AUDIO = Yields((Stage("read", _fn), Stage("decode", _fn, batchable=True), Stage("features", _fn, batchable=True)))
IMAGE = Yields((Stage("read", _fn), Stage("decode", _fn, random=True), Stage("scale", _fn, batchable=True)))
BLOCKS = Yields((Stage("cast", _fn, batchable=True),), records=True, blocked=True)
RECORDS = Yields((Stage("parse", _fn, batchable=True),), records=True)
FIXED = Yields((Stage("read", _fn, fixed_shape=True, example_bytes=8000),
                Stage("decode", _fn, batchable=True, fixed_shape=True)))


def _plan(p=OPT, source=AUDIO, **request):
    """The plan's ops in order, stages named, arguments left out (they are checked on their own)."""
    steps = plan(p, source, Request(**request))
    return " -> ".join(s.name + (f"({'+'.join(x.name for x in s.stages)})" if getattr(s, "stages", ()) else "")
                       for s in steps if not isinstance(s, (plan_lib.ReuseMemory, plan_lib.Options)))


def test_the_optimized_chain_reads_like_the_proven_order():
    # The order step is repeat + shuffle files in one: each epoch a seeded permutation of the files.
    assert _plan() == "order -> map(read) -> batch -> map(decode+features) -> prefetch -> prefetch_to_device"


def test_per_example_work_of_fixed_shapes_is_grouped_into_one_call_per_group():
    assert _plan(OPT, FIXED) == ("order -> group -> map(read) -> rebatch -> map(decode) -> prefetch "
                                 "-> prefetch_to_device")
    assert next(s for s in plan(OPT, FIXED) if s.name == "map").group == 8
    # Not where a group could straddle the data's end (eval, epochs), nor for shapes that vary.
    assert "group" not in _plan(OPT, FIXED, mode="eval") and "group" not in _plan(OPT, FIXED, epochs=2)
    assert "group" not in _plan(OPT, AUDIO) and "group" not in _plan(dataclasses.replace(OPT, group_maps=False), FIXED)
    per_example = Yields((Stage("decode", _fn, fixed_shape=True, example_bytes=3072),), records=True, blocked=True)
    assert _plan(OPT, per_example).startswith("order -> group -> map(decode) -> rebatch")  # windows re-cut into groups
    # Big examples are not grouped: stacking them costs more than the per-element steps it saves.
    big = Yields((Stage("decode", _fn, fixed_shape=True, example_bytes=224 * 224 * 3 * 4),), records=True, blocked=True)
    assert "group" not in _plan(OPT, big)



def test_a_batchable_read_runs_on_batches_but_stays_per_file_under_a_cache_or_a_skip():
    # A domain whose read also takes a batch of files (the audio domain's): after the batch, in the
    # one parallel map. A cache must keep what was read (bytes, not file names), and on_error="skip"
    # drops one failing file, not its whole batch: there the read stays per file.
    reads = Yields((Stage("read", _fn, batchable=True), Stage("decode", _fn, batchable=True)))
    assert _plan(OPT, reads) == "order -> batch -> map(read+decode) -> prefetch -> prefetch_to_device"
    assert _plan(dataclasses.replace(OPT, cache="memory"), reads).startswith("map(read) -> cache ->")
    no_order = dataclasses.replace(OPT, shuffle_filenames=False)  # the example shuffle sees read examples
    assert _plan(no_order, reads).startswith("repeat -> map(read) -> shuffle_examples -> batch -> map(decode)")
    assert _plan(OPT, reads, mode="eval") == "batch -> map(read+decode) -> prefetch -> prefetch_to_device"
    assert _plan(OPT, reads, on_error="skip").startswith("order -> map(read) -> batch -> map(decode)")


def test_the_naive_chain_is_the_seed_questions():
    assert _plan(NAIVE) == "map(read) -> shuffle_examples -> map(decode) -> map(features) -> batch -> repeat"


def test_the_toggles_between_give_the_tf_data_steps_they_name():
    no_order = dataclasses.replace(OPT, shuffle_filenames=False)
    assert _plan(no_order) == ("repeat -> map(read) -> shuffle_examples -> batch -> map(decode+features) -> prefetch "
                               "-> prefetch_to_device")
    shuffle_then_repeat = dataclasses.replace(OPT, repeat_before_shuffle=False)
    assert _plan(shuffle_then_repeat).startswith("shuffle_files -> map(read) -> batch -> map(decode+features) -> repeat")


def test_eval_and_predict_are_one_ordered_pass():
    assert _plan(mode="eval") == "map(read) -> batch -> map(decode+features) -> prefetch -> prefetch_to_device"
    assert _plan(mode="predict", device_prefetch=False) == (
        "map(read) -> batch -> map(decode+features) -> features_only -> prefetch")
    assert all(s.deterministic for s in plan(OPT, AUDIO, Request(mode="eval")) if isinstance(s, plan_lib.Map))


def test_length_buckets_batch_train_only_so_eval_keeps_input_order():
    p = dataclasses.replace(OPT, bucket_boundaries=(10, 20))
    batches = {mode: next(s for s in plan(p, AUDIO, Request(mode=mode)) if isinstance(s, plan_lib.Batch))
               for mode in ("train", "eval", "predict")}
    assert batches["train"].buckets == (10, 20) and batches["eval"].buckets == batches["predict"].buckets == ()


def test_a_cache_sits_before_the_first_random_stage_and_epochs_stay_apart():
    # Images: the random crop runs after the cache, so every epoch draws new crops; a whole-epoch
    # shuffle before the repeat keeps each epoch exactly the data once.
    assert _plan(dataclasses.replace(OPT, cache="memory"), IMAGE) == (
        "map(read) -> cache -> shuffle_examples -> repeat -> map(decode) -> batch -> map(scale) -> prefetch "
        "-> prefetch_to_device")
    # Nothing random: every per-example stage's work is cached.
    assert _plan(dataclasses.replace(NAIVE, cache="memory")) == (
        "map(read) -> map(decode) -> map(features) -> cache -> shuffle_examples -> repeat -> batch")
    # Eval crops are central: decoded images are cached.
    assert _plan(dataclasses.replace(OPT, cache="memory"), IMAGE, mode="eval").startswith("map(read) -> cache")


def test_fused_maps_never_cross_a_cache():
    p = dataclasses.replace(OPT, cache="memory", vectorize=False)
    assert _plan(p, IMAGE) == ("map(read) -> cache -> shuffle_examples -> repeat -> map(decode+scale) -> batch "
                               "-> prefetch -> prefetch_to_device")


def test_user_functions_process_is_taken_as_random_read_is_not():
    from tfpipe.core.stage import user_stages

    stages = tuple(user_stages(read=_fn, process=_fn, batch_process=_fn))
    assert [s.random for s in stages] == [False, True, True]
    assert _plan(dataclasses.replace(OPT, cache="memory"), Yields(stages)).startswith(
        "map(read) -> cache -> shuffle_examples -> repeat -> map(process) -> batch -> map(batch_process)")


def test_records_train_in_permuted_windows_recut_into_batches():
    # Blocks and records alike: the order reads each epoch's files and permutes windows of
    # examples; the windows are re-cut into batches, so no example crosses tf.data alone.
    assert _plan(OPT, BLOCKS) == "order -> rebatch -> map(cast) -> prefetch -> prefetch_to_device"
    assert _plan(OPT, RECORDS) == "order -> rebatch -> map(parse) -> prefetch -> prefetch_to_device"
    order = plan(dataclasses.replace(OPT, shuffle_buffer=100), dataclasses.replace(RECORDS, num_examples=60),
                 Request(seed=5))[1]
    assert (order.records, order.window, order.seed, order.parallel_reads) == (True, 60, 5, True)
    # Big records: the window holds at most WINDOW_BYTES of them (16 MiB: 64 raw images of 256 KiB).
    raw = dataclasses.replace(RECORDS, num_examples=2000, example_bytes=256 << 10)
    assert plan(OPT, raw, Request(seed=5))[1].window == 64
    assert _plan(OPT, BLOCKS, mode="eval") == "read_files -> rebatch -> map(cast) -> prefetch -> prefetch_to_device"


def test_blocks_and_windows_are_unblocked_when_something_runs_per_example_or_shapes_vary():
    per_example = Yields((Stage("decode", _fn),), records=True, blocked=True)
    assert _plan(OPT, per_example).startswith("order -> unblock -> map(decode) -> batch")
    ragged = dataclasses.replace(BLOCKS, fixed_shapes=False)
    assert _plan(OPT, ragged).startswith("order -> unblock -> batch")
    # Off the order, the toggles' own steps: the example-level shuffle stays a toggle.
    assert _plan(dataclasses.replace(OPT, shuffle_filenames=False, shuffle_blocks=False), BLOCKS).startswith(
        "repeat -> read_files -> unblock -> shuffle_examples -> batch")
    assert _plan(NAIVE, BLOCKS) == "read_files -> unblock -> shuffle_examples -> map(cast) -> batch -> repeat"
    assert _plan(dataclasses.replace(OPT, vectorize=False), RECORDS).startswith("order -> unblock -> map(parse) -> batch")


def test_a_start_position_takes_the_order_whatever_the_toggles():
    assert _plan(start=40) == "order -> map(read) -> batch -> map(decode+features) -> prefetch -> prefetch_to_device"
    assert _plan(NAIVE, start=40) == "order -> map(read) -> map(decode) -> map(features) -> batch"
    assert plan(NAIVE, AUDIO, Request(start=40, seed=9))[0] == plan_lib.Order(seed=9, start=40)


def test_input_contexts_shard_first_and_the_service_runs_everything_above_it():
    p = dataclasses.replace(OPT, data_service="grpc://localhost:5050")
    assert _plan(p, pipelines=2, pipeline=1, feature_key="log_mel") == (
        "shard -> order -> map(read) -> batch -> map(decode+features) -> pick -> distribute "
        "-> prefetch -> prefetch_to_device")
    steps = plan(p, AUDIO, Request(pipelines=2, pipeline=1))
    assert steps[1] == plan_lib.Shard(2, 1)
    # The workers run the options' part of the chain: the options come right before distribute.
    names = [s.name for s in steps]
    assert names[names.index("distribute") - 1] == "options"


def test_epochs_go_to_the_order_or_the_repeat_wherever_it_is():
    assert plan(OPT, AUDIO, Request(epochs=3))[1].epochs == 3
    assert next(s for s in plan(NAIVE, AUDIO, Request(epochs=3)) if s.name == "repeat").count == 3


def test_every_step_carries_its_sizes_so_the_chain_reads_no_config():
    p = dataclasses.replace(OPT, batch_size=7, shuffle_buffer=50, cycle_length=3, shuffle_filenames=False)
    records = dataclasses.replace(RECORDS, num_files=4, num_examples=40, block_length=16, longest_file=12)
    steps = {s.name: s for s in plan(p, records, Request(seed=2))}
    assert steps["batch"].size == 7 and steps["batch"].drop_remainder
    assert steps["shuffle_examples"] == plan_lib.ShuffleExamples(buffer=40, seed=2)
    assert (steps["read_files"].cycle_length, steps["read_files"].block_length) == (3, 16)
    eval_reads = next(s for s in plan(p, records, Request(mode="eval")) if s.name == "read_files")
    assert eval_reads.block_length == 12 and eval_reads.deterministic  # each file whole, in order


@pytest.mark.parametrize("toggle", TOGGLES)
def test_every_toggle_changes_some_plan(toggle):
    flipped = dataclasses.replace(OPT, **{toggle: not getattr(OPT, toggle)})
    cases = [(AUDIO, {}), (IMAGE, {}), (BLOCKS, {}), (RECORDS, {}), (AUDIO, {"mode": "eval"}), (FIXED, {})]
    differs = [plan(OPT, src, Request(**r)) != plan(flipped, src, Request(**r)) for src, r in cases]
    # shuffle_blocks is the block shuffle of chains off the order (shuffle_filenames=False)
    off_order = dataclasses.replace(OPT, shuffle_filenames=False)
    differs.append(plan(off_order, BLOCKS) != plan(dataclasses.replace(off_order, **{toggle: not getattr(OPT, toggle)}),
                                                   BLOCKS))
    assert any(differs)


def test_describe_says_each_steps_arguments_and_why():
    text = describe(plan(OPT, RECORDS, Request(seed=1)), why=True)
    assert (" 2. order(seed=1, start=0, records=True, blocked=False, window=1, parallel_reads=True, cycle_length=0, "
            "longest_file=1)") in text
    assert "why: repeat + shuffle files in one" in text
    assert describe(plan(OPT, AUDIO, Request(mode="eval"))).startswith("reuse_memory -> map(read, parallel=True")


def test_the_plan_needs_no_tensorflow():
    code = ("import sys; from tfpipe.core.plan import plan, Yields; from tfpipe.core.stage import Stage; "
            "from tfpipe.config import PipelineConfig; "
            "plan(PipelineConfig(), Yields((Stage('read', len),))); "
            "print(sorted(m for m in sys.modules if m.startswith('tensorflow')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_snapshot_keeps_what_read_returns_and_a_memory_cache_all_deterministic_work():
    snapshot = dataclasses.replace(NAIVE, cache="snapshot:/tmp/s")
    assert _plan(snapshot).startswith("map(read) -> cache -> shuffle_examples -> repeat -> map(decode) -> map(features)")
    assert _plan(dataclasses.replace(OPT, cache="snapshot:/tmp/s"), IMAGE, mode="eval").startswith(
        "map(read) -> cache -> map(decode) -> batch")
