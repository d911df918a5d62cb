"""Input contexts: the input pipelines of a distributed run read disjoint shares that together
make the whole data, in eval and in each train epoch."""

import pytest
import tensorflow as tf

import tfpipe
from tests.conformance import runners
from tests.conformance.conftest import KINDS, preset

PIPELINES = 2


def _context(i):
    return tf.distribute.InputContext(num_input_pipelines=PIPELINES, input_pipeline_id=i,
                                      num_replicas_in_sync=PIPELINES)


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "tfds"])
def test_input_pipelines_read_disjoint_shares_that_make_the_whole(kinds, kind):
    k, p = kinds[kind], preset("optimized", None)
    shares = [runners.flat(runners.eager(tfpipe.build_dataset(k.data(), "eval", p, input_context=_context(i),
                                                              **k.kwargs), k.ids)) for i in range(PIPELINES)]
    assert sorted(shares[0] + shares[1]) == sorted(k.order) and not set(shares[0]) & set(shares[1])
    if kind == "mixture":
        return  # train draws by weight: no epochs to compare
    for i, share in enumerate(shares):
        ds = tfpipe.build_dataset(k.data(), "train", p, input_context=_context(i), **k.kwargs)
        epoch = runners.flat(runners.eager(ds, k.ids, len(share) // 4))
        assert sorted(epoch) == sorted(share), f"pipeline {i}'s first train epoch"


def test_fewer_files_than_input_pipelines_is_refused_naming_the_fix(kinds):
    k = kinds["tfds"]  # tensorflow_datasets wrote these 24 examples into one file
    with pytest.raises(ValueError, match=r"1 files but 2 input pipelines.*write at least 2 shards"):
        tfpipe.build_dataset(k.data(), "eval", preset("optimized", None), input_context=_context(0), **k.kwargs)
