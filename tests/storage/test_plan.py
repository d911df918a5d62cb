"""storage/plan.py: the pure shard plan and the default sizes, at realistic sizes and without disk."""

import numpy as np
import pytest

from tfpipe.storage import plan as plan_lib
from tfpipe.storage.plan import SHARD_PATTERN, check_split, default_num_shards, default_workers, plan_shards


def test_plan_is_deterministic_balanced_mixed_and_exact_at_100k_examples():
    labels = np.repeat([0, 1, 2], [50_000, 30_000, 20_000])
    plan = plan_shards(labels, 128, seed=7)
    assert plan == plan_shards(labels, 128, seed=7)
    assert plan != plan_shards(labels, 128, seed=8)
    assert [s.file for s in plan[:2]] == ["train-00000-of-00128.tfrecord", "train-00001-of-00128.tfrecord"]
    every = np.concatenate([s.examples for s in plan])
    np.testing.assert_array_equal(np.sort(every), np.arange(labels.size))  # each example exactly once
    sizes = [len(s.examples) for s in plan]
    assert max(sizes) - min(sizes) <= 1
    per_class = np.array([np.bincount(labels[list(s.examples)], minlength=3) for s in plan])
    for c, n in enumerate([50_000, 30_000, 20_000]):
        assert set(per_class[:, c]) <= {n // 128, n // 128 + 1}  # every shard holds every class
    first = labels[list(plan[0].examples)]
    assert (np.diff(first) != 0).sum() > len(first) // 3  # records inside a shard are mixed, not sorted


def test_plan_rejects_more_shards_than_examples_and_bad_split_names():
    with pytest.raises(ValueError, match=r"num_shards=5 for 4 examples.*--num_shards"):
        plan_shards([0, 0, 1, 1], 5)
    with pytest.raises(ValueError, match=r"split='a/b': use letters, digits"):
        check_split("a/b")
    assert SHARD_PATTERN.match(plan_shards([0, 1], 2, split="eval.v2")[1].file).group("split") == "eval.v2"


@pytest.mark.parametrize("examples, example_bytes, expected", [
    (10, 0, 10),  # fewer examples than 16: one shard each
    (100, 4_000, 16),
    (100_000, 100_000, 38),  # 10 GB: ceil(10e9 / 256 MiB) shards of at most 256 MiB
])
def test_default_num_shards_is_16_or_more_above_256_mib_a_shard(examples, example_bytes, expected):
    assert default_num_shards(examples, example_bytes) == expected


def test_default_workers_by_corpus_size_up_to_the_usable_cores(monkeypatch):
    monkeypatch.setattr(plan_lib.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert default_workers(9_999, 16) == 0  # starting workers would cost more than it saves
    assert default_workers(25_000, 16) == 2
    assert default_workers(1_000_000, 16) == 4  # the cores
    assert default_workers(1_000_000, 3) == 3  # whole shards per worker
    monkeypatch.setattr(plan_lib.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert default_workers(1_000_000, 16) == 0
