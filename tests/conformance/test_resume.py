"""Positions: start_step and an Estimator resuming from its checkpoint continue the train stream
exactly, eagerly and in graph mode; a change that makes that impossible is handled and said."""

import logging

import dataclasses
import pytest

import tfpipe
from tests.conformance import runners, world
from tests.conformance.conftest import KINDS, preset

RESUMABLE = [k for k in KINDS if k != "mixture"]
K = 3  # steps per train call


def _stream(k, p, batches, start_step=None):
    return runners.flat(runners.eager(tfpipe.build_dataset(k.data(), "train", p, start_step=start_step, **k.kwargs),
                                      k.ids, batches))


@pytest.mark.parametrize("kind", RESUMABLE)
def test_start_step_continues_the_stream_eagerly_and_in_a_graph(kinds, kind):
    k, p = kinds[kind], preset("optimized", None)
    whole = _stream(k, p, 8)
    start = 5  # inside the first epoch, inside a file of records
    assert _stream(k, p, 3, start_step=start) == whole[start * world.BATCH:]
    in_graph = runners.flat(runners.graph(lambda: tfpipe.build_dataset(k.data(), "train", p, start_step=start,
                                                                         **k.kwargs), k.ids, 3))
    assert in_graph == whole[start * world.BATCH:]


@pytest.mark.parametrize("kind", RESUMABLE)
def test_an_estimator_training_twice_sees_what_it_sees_training_once(kinds, kind, tmp_path):
    k, p = kinds[kind], preset("optimized", None)
    input_fn = tfpipe.make_input_fn(k.data(), "train", p, **k.kwargs)
    first = runners.estimator(input_fn, k.ids, tmp_path / "model", K)
    second = runners.estimator(input_fn, k.ids, tmp_path / "model", K)
    once = runners.estimator(input_fn, k.ids, tmp_path / "once", 2 * K)
    assert runners.flat(first + second) == runners.flat(once)
    assert runners.flat(once) == _stream(k, p, 2 * K)  # the Estimator's graph and eager agree


@pytest.mark.parametrize("kind", ["shards-v2", "records+spec", "wav"])
def test_a_batch_size_change_between_calls_continues_at_the_same_example(kinds, kind, tmp_path, caplog):
    k, p = kinds[kind], preset("optimized", None)
    first = runners.estimator(tfpipe.make_input_fn(k.data(), "train", p, **k.kwargs), k.ids, tmp_path / "m", K)
    bigger = dataclasses.replace(p, batch_size=6)
    with caplog.at_level(logging.WARNING, logger="tfpipe"):
        second = runners.estimator(tfpipe.make_input_fn(k.data(), "train", bigger, **k.kwargs), k.ids,
                                   tmp_path / "m", K)
    assert [len(ids) for ids, _ in second] == [6] * K
    assert runners.flat(first + second) == _stream(k, p, 8)[:K * 4 + K * 6]
    assert "batch size 4 x 1 -> 6 x 1" in caplog.text


@pytest.mark.parametrize("kind", ["shards-v2", "wav"])
def test_a_seed_change_between_calls_starts_the_next_epoch_and_says_so(kinds, kind, tmp_path, caplog):
    k, p = kinds[kind], preset("optimized", None)
    n = len(k.order)
    first = runners.estimator(tfpipe.make_input_fn(k.data(), "train", p, **k.kwargs), k.ids, tmp_path / "m", K)
    reseeded = dataclasses.replace(p, seed=p.seed + 1)
    with caplog.at_level(logging.WARNING, logger="tfpipe"):
        second = runners.estimator(tfpipe.make_input_fn(k.data(), "train", reseeded, **k.kwargs), k.ids,
                                   tmp_path / "m", K)
    # The rest of the old order's epoch is not mixed with the new order's (which would repeat some
    # examples and skip others): the next epoch starts, in the new order.
    assert runners.flat(second) == _stream(k, reseeded, (n + K * 4) // 4)[n:]
    assert runners.flat(first) == _stream(k, p, K)
    assert "seed" in caplog.text and "start of epoch 1" in caplog.text


def test_what_cannot_resume_is_refused_with_the_way_out(kinds, tmp_path):
    k = kinds["mixture"]
    with pytest.raises(ValueError, match=r"a mixture cannot resume mid-stream.*resume=False"):
        runners.estimator(tfpipe.make_input_fn(k.data(), "train", preset("optimized", None), **k.kwargs), k.ids,
                          tmp_path / "m", K)
    wav = kinds["wav"]
    with pytest.raises(ValueError, match=r"cache.*cannot start where the last checkpoint stopped.*resume=False"):
        tfpipe.make_input_fn(wav.data(), "train", preset("cache", tmp_path), **wav.kwargs)
