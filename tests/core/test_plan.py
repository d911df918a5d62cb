"""The chain plan: which steps run in which order, decided without TensorFlow."""

import dataclasses
import subprocess
import sys

import pytest

from tfpipe.config import TOGGLES, PipelineConfig
from tfpipe.core.plan import Request, Yields, describe, plan
from tfpipe.core.stage import Stage

OPT, NAIVE = PipelineConfig.optimized(), PipelineConfig.naive()


def _fn(*element):
    return element


AUDIO = Yields((Stage("read", _fn), Stage("decode", _fn, batchable=True), Stage("features", _fn, batchable=True)))
IMAGE = Yields((Stage("read", _fn), Stage("decode", _fn, random=True), Stage("scale", _fn, batchable=True)))
BLOCKS = Yields((Stage("cast", _fn, batchable=True),), records=True, blocked=True)
RECORDS = Yields((Stage("parse", _fn, batchable=True),), records=True)


def _plan(p=OPT, source=AUDIO, **request):
    return describe(plan(p, source, Request(**request)))


def test_the_optimized_chain_reads_like_the_proven_order():
    assert _plan() == ("repeat -> shuffle_files -> map(read) -> batch -> map(decode+features) -> prefetch "
                       "-> prefetch_to_device")


def test_the_naive_chain_is_the_seed_questions():
    assert _plan(NAIVE) == "map(read) -> shuffle_examples -> map(decode) -> map(features) -> batch -> repeat"


def test_eval_and_predict_are_one_ordered_pass():
    assert _plan(mode="eval") == "map(read) -> batch -> map(decode+features) -> prefetch -> prefetch_to_device"
    assert _plan(mode="predict", device_prefetch=False) == (
        "map(read) -> batch -> map(decode+features) -> features_only -> prefetch")


def test_a_cache_sits_before_the_first_random_stage():
    # Images: the random crop runs after the cache, so every epoch draws new crops.
    assert _plan(dataclasses.replace(OPT, cache="memory"), IMAGE) == (
        "map(read) -> cache -> repeat -> shuffle_examples -> map(decode) -> batch -> map(scale) -> prefetch "
        "-> prefetch_to_device")
    # Nothing random: every per-example stage's work is cached.
    assert _plan(dataclasses.replace(NAIVE, cache="memory")) == (
        "map(read) -> map(decode) -> map(features) -> cache -> shuffle_examples -> batch -> repeat")
    # Eval crops are central: decoded images are cached.
    assert _plan(dataclasses.replace(OPT, cache="memory"), IMAGE, mode="eval").startswith("map(read) -> cache")


def test_fused_maps_never_cross_a_cache():
    p = dataclasses.replace(OPT, cache="memory", vectorize=False)
    assert _plan(p, IMAGE) == ("map(read) -> cache -> repeat -> shuffle_examples -> map(decode+scale) -> batch "
                               "-> prefetch -> prefetch_to_device")


def test_user_functions_process_is_taken_as_random_read_is_not():
    from tfpipe.core.stage import user_stages

    stages = tuple(user_stages(read=_fn, process=_fn, batch_process=_fn))
    assert [s.random for s in stages] == [False, True, True]
    assert _plan(dataclasses.replace(OPT, cache="memory"), Yields(stages)).startswith(
        "map(read) -> cache -> repeat -> shuffle_examples -> map(process) -> batch -> map(batch_process)")


def test_block_shards_cross_the_chain_whole_in_train_and_eval():
    assert _plan(OPT, BLOCKS) == ("repeat -> shuffle_files -> read_files -> shuffle_blocks -> rebatch -> map(cast) "
                                  "-> prefetch -> prefetch_to_device")
    assert _plan(OPT, BLOCKS, mode="eval") == "read_files -> rebatch -> map(cast) -> prefetch -> prefetch_to_device"
    # The example-level shuffle stays a toggle; the naive chain un-blocks and shuffles examples.
    assert _plan(dataclasses.replace(OPT, shuffle_blocks=False), BLOCKS).startswith(
        "repeat -> shuffle_files -> read_files -> unblock -> shuffle_examples -> batch")
    assert _plan(NAIVE, BLOCKS) == "read_files -> unblock -> shuffle_examples -> map(cast) -> batch -> repeat"


def test_blocks_are_unblocked_when_something_runs_per_example_or_shapes_vary():
    per_example = Yields((Stage("decode", _fn),), records=True, blocked=True)
    assert "unblock -> shuffle_examples -> map(decode) -> batch" in _plan(OPT, per_example)
    ragged = dataclasses.replace(BLOCKS, fixed_shapes=False)
    assert "unblock -> shuffle_examples -> batch" in _plan(OPT, ragged)


def test_records_are_shuffled_then_parsed_on_whole_batches():
    assert _plan(OPT, RECORDS) == ("repeat -> shuffle_files -> read_files -> shuffle_examples -> batch -> map(parse) "
                                   "-> prefetch -> prefetch_to_device")
    assert _plan(dataclasses.replace(OPT, vectorize=False), RECORDS).startswith(
        "repeat -> shuffle_files -> read_files -> shuffle_examples -> map(parse) -> batch")


def test_resume_replaces_repeat_and_both_shuffles():
    assert _plan(resume=True) == "resume -> map(read) -> batch -> map(decode+features) -> prefetch -> prefetch_to_device"
    assert _plan(NAIVE, resume=True) == "resume -> map(read) -> map(decode) -> map(features) -> batch"
    assert _plan(OPT, BLOCKS, resume=True).startswith("resume -> batch")


def test_input_contexts_shard_first_and_the_service_runs_everything_above_it():
    p = dataclasses.replace(OPT, data_service="grpc://localhost:5050")
    assert _plan(p, sharded=True, feature_key="log_mel") == (
        "shard -> repeat -> shuffle_files -> map(read) -> batch -> map(decode+features) -> pick -> distribute "
        "-> prefetch -> prefetch_to_device")


def test_epochs_go_to_the_repeat_wherever_it_is():
    assert plan(OPT, AUDIO, Request(epochs=3))[0].count == 3
    assert plan(NAIVE, AUDIO, Request(epochs=3))[-1].count == 3


@pytest.mark.parametrize("toggle", TOGGLES)
def test_every_toggle_changes_some_plan(toggle):
    flipped = dataclasses.replace(OPT, **{toggle: not getattr(OPT, toggle)})
    cases = [(AUDIO, {}), (IMAGE, {}), (BLOCKS, {}), (RECORDS, {})]
    differs = [plan(OPT, src, Request(**r)) != plan(flipped, src, Request(**r)) for src, r in cases]
    # deterministic only sets the order of parallel steps (an argument of the chain, not a step);
    # reuse_memory is the process's malloc setting (tests/core/test_memory.py)
    assert any(differs) or toggle in ("deterministic", "reuse_memory")


def test_the_plan_needs_no_tensorflow():
    code = ("import sys; from tfpipe.core.plan import plan, Yields; from tfpipe.core.stage import Stage; "
            "from tfpipe.config import PipelineConfig; "
            "plan(PipelineConfig(), Yields((Stage('read', len),))); "
            "print(sorted(m for m in sys.modules if m.startswith('tensorflow')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_snapshot_keeps_what_read_returns_and_a_memory_cache_all_deterministic_work():
    snapshot = dataclasses.replace(NAIVE, cache="snapshot:/tmp/s")
    assert _plan(snapshot).startswith("map(read) -> cache -> shuffle_examples -> map(decode) -> map(features)")
    assert _plan(dataclasses.replace(OPT, cache="snapshot:/tmp/s"), IMAGE, mode="eval").startswith(
        "map(read) -> cache -> map(decode) -> batch")
