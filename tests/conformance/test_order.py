"""Eval and predict: every example exactly once, in input order, for every source kind and preset,
eagerly and in an Estimator's graph (bucketing, shuffles and caches never reorder them)."""

import pytest

import tfpipe
from tests.conformance import runners
from tests.conformance.conftest import KINDS, PRESETS, preset


@pytest.mark.parametrize("mode", ["eval", "predict"])
@pytest.mark.parametrize("preset_name", list(PRESETS))
@pytest.mark.parametrize("kind", KINDS)
def test_eval_and_predict_yield_every_example_once_in_input_order(kinds, kind, preset_name, mode, tmp_path):
    k = kinds[kind]
    ds = tfpipe.build_dataset(k.data(), mode, preset(preset_name, tmp_path), **k.kwargs)
    assert tuple(runners.flat(runners.eager(ds, k.ids))) == k.order


@pytest.mark.parametrize("preset_name", ["naive", "optimized", "buckets"])
@pytest.mark.parametrize("kind", KINDS)
def test_an_estimators_eval_input_fn_yields_the_same_order_in_its_graph(kinds, kind, preset_name, tmp_path):
    k = kinds[kind]
    input_fn = tfpipe.make_input_fn(k.data(), "eval", preset(preset_name, tmp_path), **k.kwargs)
    assert tuple(runners.flat(runners.graph(input_fn, k.ids))) == k.order
