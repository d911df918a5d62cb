"""tfpipe.mix: examples drawn from several sources with weights; eval reads each member once."""

import collections

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.train.estimator import make_input_fn

OPT = tfpipe.PipelineConfig.optimized(batch_size=100, seed=5)


def _shards(tmp_path, name, n, value, key="x"):
    """Your own examples (every value `value`) in block shards."""
    out = str(tmp_path / name)
    examples = ({key: np.full([2], value, np.float32), "label": i % 2} for i in range(n))
    tfpipe.write_shards(examples, out, num_shards=2, label_key="label", progress=False)
    return out


@pytest.fixture
def members(tmp_path):
    return _shards(tmp_path, "a", 100, 1.0), _shards(tmp_path, "b", 60, 2.0)


def test_train_draws_with_the_weights(members):
    a, b = members
    ds = tfpipe.build_dataset(tfpipe.mix([(a, 4), (b, 1)]), "train", OPT)  # weights normalized: 0.8, 0.2
    drawn = collections.Counter(np.concatenate([f["x"][:, 0] for f, _ in ds.take(100).as_numpy_iterator()]).tolist())
    assert sum(drawn.values()) == 10_000
    assert abs(drawn[1.0] / 10_000 - 0.8) < 0.03 and abs(drawn[2.0] / 10_000 - 0.2) < 0.03


def test_eval_gives_every_members_examples_once_member_after_member(members):
    a, b = members
    batches = list(tfpipe.build_dataset(tfpipe.mix([(a, 0.5), (b, 0.5)]), "eval", OPT).as_numpy_iterator())
    values = np.concatenate([f["x"][:, 0] for f, _ in batches]).tolist()
    assert values == [1.0] * 100 + [2.0] * 60


def test_each_member_has_its_own_process_and_the_batches_one_batch_process(members):
    a, b = members

    def tag(value):
        return lambda features, label: ({"x": features["x"] + value}, label)

    def batch_mean(features, labels):
        return {"x": features["x"], "mean": tf.reduce_mean(features["x"], axis=-1)}, labels

    source = tfpipe.mix([(a, 1), (b, 1)], process=[tag(10.0), tag(20.0)], batch_process=batch_mean)
    batches = list(tfpipe.build_dataset(source, "eval", OPT).as_numpy_iterator())
    values = np.concatenate([f["mean"] for f, _ in batches]).tolist()
    assert values == [11.0] * 100 + [22.0] * 60


def test_members_that_differ_are_refused_naming_the_difference(members, tmp_path):
    a, _ = members
    other = _shards(tmp_path, "c", 10, 0.0, key="y")
    with pytest.raises(ValueError, match=r"member 1's examples differ from member 0's: .*'x'.* vs .*'y'"):
        tfpipe.build_dataset(tfpipe.mix([(a, 1), (other, 1)]), "train", OPT)


@pytest.mark.parametrize("args,message", [
    (([],), r"mix\(\[\]\): name at least one"),
    (([("a", 0)],), r"member 0: weight 0 must be a positive, finite number"),
    (([("a", 1), ("b", -1)],), r"member 1: weight -1 must be a positive, finite number"),
    (([("a", float("inf")), ("b", 1)],), r"member 0: weight inf must be a positive, finite number"),
    (([("a", 1), ("b", float("nan"))],), r"member 1: weight nan must be a positive, finite number"),
])
def test_bad_weights_are_refused(args, message):
    with pytest.raises(ValueError, match=message):
        tfpipe.mix(*args)


def test_a_function_list_needs_one_per_member(members):
    with pytest.raises(ValueError, match="process= lists 1 functions for 2 members"):
        tfpipe.mix([(m, 1) for m in members], process=[lambda f, l: (f, l)])


def test_resuming_a_mixture_is_refused_with_the_choice(members):
    source = tfpipe.mix([(m, 1) for m in members])
    with pytest.raises(ValueError, match=r"a mixture cannot resume mid-stream.*resume=False"):
        make_input_fn(source, "train", OPT)()
    assert next(iter(make_input_fn(source, "train", OPT, resume=False)()))[1].shape == (100,)
    with pytest.raises(ValueError, match="cannot start mid-stream"):
        tfpipe.build_dataset(source, "train", OPT, start_step=3)


def test_class_names_pin_every_members_ids(tmp_path):
    from tests.support import make_corpus

    a = make_corpus(tmp_path / "a", classes=("bee", "cat"), per_class=2)
    b = make_corpus(tmp_path / "b", classes=("ant", "cat"), per_class=2)
    names = ("ant", "bee", "cat")
    mixed = tfpipe.mix([(a, 1.0), (b, 1.0)], class_names=names)
    assert mixed.class_names == names  # not the order of first appearance (bee, cat, ant)
    pipe = tfpipe.PipelineConfig.naive(batch_size=8)
    (_, labels), = tfpipe.build_dataset(mixed, "eval", pipe,
                                        features=tfpipe.AudioConfig(clip_seconds=0.25)).as_numpy_iterator()
    assert [names[i] for i in labels] == ["bee", "bee", "cat", "cat", "ant", "ant", "cat", "cat"]
    with pytest.raises(ValueError, match=r"classes 'ant' are not in class_names \('bee', 'cat'\)"):
        tfpipe.mix([(a, 1.0), (b, 1.0)], class_names=("bee", "cat"))
