"""tfpipe.describe: the plan build_dataset applies, shown one line per step with its arguments and why."""

import re

import pytest

import tfpipe
from tests.support import make_corpus
from tfpipe.core import chain
from tfpipe.core.plan import describe as describe_steps


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("describe") / "data", per_class=4)


def test_it_is_the_plan_build_dataset_applies(corpus):
    pipe = tfpipe.PipelineConfig.optimized(batch_size=4, seed=7)
    shown = tfpipe.describe(corpus, "train", pipe)
    steps, _ = chain.planned(corpus, "train", pipe, seed=7)
    heading, *lines = shown.splitlines()
    assert heading == f"train chain over {corpus}: 12 files, 12 examples an epoch, batch 4"
    assert "\n".join(lines) == describe_steps(steps, why=True)
    numbered = [line for line in lines if re.match(r"\s*\d+\. ", line)]
    assert len(numbered) == len(steps) and "order(seed=7" in numbered[1]
    # The optimized train order is one step: no separate repeat or file shuffle.
    assert not any(re.match(r"\s*\d+\. (repeat|shuffle_files)", line) for line in numbered)
    assert any("why: repeat + shuffle files in one" in line for line in lines)


def test_naive_eval_and_an_unset_seed(corpus):
    naive = tfpipe.describe(corpus, "train", tfpipe.PipelineConfig.naive(batch_size=4, seed=1))
    assert "shuffle_examples(buffer=12, seed=1)" in naive and re.search(r"\d+\. repeat\n", naive)
    optimized = tfpipe.PipelineConfig.optimized(batch_size=4)  # seed unset: each build draws one
    assert "seed unset: each build draws its own, shown as 0" in tfpipe.describe(corpus, "train", optimized)
    evaluated = tfpipe.describe(corpus, "eval", optimized)
    assert "order(" not in evaluated and "drop_remainder=False" in evaluated


def test_bad_arguments_fail_as_build_dataset_does(corpus, tmp_path):
    with pytest.raises(ValueError, match="mode='fit'"):
        tfpipe.describe(corpus, "fit")
    with pytest.raises(ValueError, match="start_step=3 with cache"):
        tfpipe.describe(corpus, "train", tfpipe.PipelineConfig.optimized(cache="memory"), start_step=3)
    with pytest.raises(ValueError):
        tfpipe.describe(str(tmp_path / "nowhere"), "train")
