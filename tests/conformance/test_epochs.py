"""Train: each epoch yields the data's multiset exactly, with every label its class's id, for every
source kind and preset; where a preset cannot keep epochs apart (length buckets hold examples back,
a mixture draws by weight), what it does guarantee."""

import collections

import pytest
import tensorflow as tf

import tfpipe
from tests.conformance import runners, world
from tests.conformance.conftest import KINDS, PRESETS, preset

EPOCHS = 3


def _label_names_hold(kind, batches):
    """Each example's label is its class's id in the source's class_names (or the id the source gives)."""
    k = kind
    names = tfpipe.find(k.data()).class_names if k.names else None
    for ids, labels in batches:
        for i, label in zip(ids, labels):
            expected = k.names[int(i)] if names is not None else k.labels[int(i)]
            got = names[int(label)] if names is not None else int(label)
            assert got == expected, f"example {int(i)}: label {int(label)} ({got!r}), expected {expected!r}"


@pytest.mark.parametrize("preset_name", list(PRESETS))
@pytest.mark.parametrize("kind", [k for k in KINDS if k != "mixture"])
def test_each_train_epoch_yields_the_data_exactly_once(kinds, kind, preset_name, tmp_path):
    k = kinds[kind]
    n = len(k.order)
    ds = tfpipe.build_dataset(k.data(), "train", preset(preset_name, tmp_path), **k.kwargs)
    batches = runners.eager(ds, k.ids, EPOCHS * n // world.BATCH + (1 if preset_name == "buckets" else 0))
    _label_names_hold(k, batches)
    ids = runners.flat(batches)
    if preset_name == "buckets" and k.variable:
        # Length buckets hold examples back until their bucket fills: an epoch's examples may come
        # up to a few batches late, never twice early: every example, EPOCHS times give or take one.
        counts = collections.Counter(ids[:EPOCHS * n])
        assert set(counts) == set(k.order) and all(EPOCHS - 1 <= c <= EPOCHS + 1 for c in counts.values())
        return
    for e in range(EPOCHS):
        epoch = ids[e * n:(e + 1) * n]
        assert sorted(epoch) == sorted(k.order), f"epoch {e}: {sorted(collections.Counter(epoch).items())}"
    assert ids[:n] != list(k.order), "the train order is shuffled"


def test_a_mixture_draws_both_members_by_weight_with_one_id_per_class_name(kinds):
    k = kinds["mixture"]
    ds = tfpipe.build_dataset(k.data(), "train", preset("optimized", None), **k.kwargs)
    batches = runners.eager(ds, k.ids, 40)
    _label_names_hold(k, batches)
    counts = collections.Counter(runners.flat(batches))
    assert set(counts) == set(k.order)  # every example of both members, 160 draws of 32
    assert sum(c for i, c in counts.items() if i < 200) > 40 and sum(c for i, c in counts.items() if i >= 200) > 40


def test_records_of_one_file_written_in_label_order_are_shuffled_within_it(tmp_path):
    # The resumable order permutes files per epoch and records in windows: a file written class
    # after class must not give batches of one class (with make_input_fn, as an Estimator trains).
    path = str(tmp_path / "sorted.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for i in range(48):
            w.write(world._example(i, i // 16))  # 16 of class 0, then 1, then 2
    source = tfpipe.records(path, spec=world._SPEC, label_key="label", progress=False)
    p = preset("optimized", tmp_path)
    for make in (lambda: tfpipe.build_dataset(source, "train", p),
                 lambda: tfpipe.make_input_fn(source, "train", p)()):
        batches = runners.graph(make, world.feature_ids, 12)
        one_class = [len(set(labels.tolist())) == 1 for _, labels in batches]
        assert sum(one_class) <= 3, f"{sum(one_class)} of 12 batches hold one class"
        assert sorted(runners.flat(batches[:12])) == sorted(list(range(48)))
