"""bench/winner.py: the report says plainly who won, from the same rounds as its ratios (pure)."""

import dataclasses
import json

from tests.bench.support import result

REFS = {"naive": "naive", "optimized": "naive", "tf-models": "naive"}


def _photos(optimized, tf_models, naive=None):
    """A run of naive, optimized and the tf-models recipe with these examples/s per round (100 examples a turn)."""
    naive = naive or [2000.0] * len(optimized)
    run = result({"naive": [100 / r for r in naive], "optimized": [100 / r for r in optimized],
                  "tf-models": [100 / r for r in tf_models]}, REFS, repeats=len(optimized))
    recipe = dataclasses.replace(run.variants[2], kind="tf-models", note="tensorflow/models ResNet recipe")
    return dataclasses.replace(run, variants=run.variants[:2] + (recipe,))


def test_a_reference_recipe_that_beats_tfpipe_in_every_round_is_named_the_winner():
    # The three runs on real photos: tf-models 4,284 / 5,097 / 5,717 against optimized 3,706 / 3,698 / 5,256.
    run = _photos(optimized=[3706.0, 3698.0, 5256.0], tf_models=[4284.0, 5097.0, 5717.0])
    (standing,) = run.standings
    assert standing.won and standing.fastest.name == "tf-models" and standing.runner_up.name == "optimized"
    line = next(line for line in run.table().splitlines() if line.startswith("winner"))
    assert line.startswith("winner: tf-models, 5,097 examples/s, 1.16x the next fastest, optimized")
    assert "the reference recipe tf-models beat tfpipe here: 1.16x tfpipe's best, optimized" in line
    data = json.loads(run.to_json())["winner"]
    assert data == [{"cores": None, "fastest": "tf-models", "won": True, "tied": [], "runner_up": "optimized",
                     "ratio": data[0]["ratio"], "best_tfpipe": "optimized", "tfpipe_won": False, "text": line}]


def test_tfpipe_winning_says_so_and_by_how_much_round_by_round():
    run = _photos(optimized=[4000.0, 4100.0, 3900.0, 4050.0, 4000.0], tf_models=[3000.0, 3100.0, 2900.0, 3000.0,
                                                                                  3050.0])
    line = run.standings[0].text()
    assert line.startswith("winner: optimized, 4,000 examples/s, 1.33x the next fastest, tf-models")
    assert "beat tfpipe" not in line and json.loads(run.to_json())["winner"][0]["tfpipe_won"] is True


def test_when_the_ratio_column_and_the_medians_disagree_the_report_names_no_winner():
    # Drift: naive swings 1,000 <-> 2,000. Against naive, optimized reads 1.50x and tf-models 1.40x, yet
    # tf-models' median (2,800) is far above optimized's (1,500): the rows cannot be ranked from this run.
    run = _photos(naive=[1000.0, 2000.0, 1000.0, 2000.0, 1000.0], optimized=[1500.0, 2400.0, 1500.0, 2400.0, 1500.0],
                  tf_models=[1300.0, 2800.0, 1300.0, 2800.0, 2800.0])
    by_name = {v.name: v for v in run.variants}
    assert by_name["optimized"].stats.ratio > by_name["tf-models"].stats.ratio  # the column's order...
    assert by_name["tf-models"].stats.median > by_name["optimized"].stats.median  # ...and the medians' differ
    (standing,) = run.standings
    assert not standing.won and [v.name for v in standing.tied] == ["optimized"]
    assert standing.text().startswith("winner: none clear: tf-models (2,800/s), optimized (1,500/s) are within "
                                      "this run's noise of each other")
    assert "(this run does not show tfpipe's best, optimized, beating tf-models)" in standing.text()


def test_medians_against_the_rounds_are_named():
    # tf-models has the higher median thanks to two fast rounds; in the other three optimized was ahead.
    run = _photos(optimized=[3000.0, 3000.0, 300.0, 300.0, 300.0], tf_models=[2700.0, 2700.0, 270.0, 6000.0, 6000.0])
    text = run.standings[0].text()
    assert "the medians put tf-models first, but round by round optimized was ahead" in text


def test_one_variant_has_no_standing_and_pinned_runs_get_one_per_core_count():
    assert result({"naive": [1.0, 1.0]}, {"naive": "naive"}).standings == []
    run = _photos(optimized=[4000.0, 4100.0, 3900.0], tf_models=[3000.0, 3100.0, 2900.0])
    pinned = dataclasses.replace(run, variants=tuple(dataclasses.replace(v, pinned=True, cores=c)
                                                     for c in (1, 2) for v in run.variants))
    assert [(s.cores, s.fastest.key) for s in pinned.standings] == [(1, "optimized@1"), (2, "optimized@2")]
    assert pinned.standings[0].text().startswith("winner at 1 core(s): optimized")
