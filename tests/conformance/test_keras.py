"""Keras fit: each epoch of steps_per_epoch batches is the data's multiset, labels by class name."""

import pytest

import tfpipe
from tests.conformance import runners, world
from tests.conformance.conftest import preset


@pytest.mark.parametrize("kind", ["wav", "image", "shards-v2", "records+spec", "files+fns"])
def test_keras_fit_trains_on_each_example_once_an_epoch(kinds, kind):
    k = kinds[kind]
    n = len(k.order)
    ds = tfpipe.build_dataset(k.data(), "train", preset("optimized", None), **k.kwargs)
    seen = runners.keras(ds, k.ids, epochs=2, steps_per_epoch=n // world.BATCH)
    ids = runners.flat(seen)
    assert sorted(ids[:n]) == sorted(k.order) and sorted(ids[n:]) == sorted(k.order)
