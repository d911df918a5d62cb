"""bench/recipes.py: reference recipes found by name in the data's domain package; one line adds one."""

import os

import numpy as np
import pytest

from tests.bench.conftest import FEAT
from tfpipe.bench import recipes
from tfpipe.config import PipelineConfig
from tfpipe.core.registry import get_domain


def test_each_domain_offers_the_recipes_its_package_has():
    from tfpipe.domains.audio.recipes import keras_recipe as audio_keras
    from tfpipe.domains.image.recipes import keras_recipe as image_keras
    from tfpipe.domains.image.recipes import tf_models_recipe

    audio, image = get_domain("audio"), get_domain("image")
    assert recipes.find(image, "keras") is image_keras and recipes.find(image, "tf-models") is tf_models_recipe
    assert recipes.load(audio, "keras") is audio_keras and recipes.find(audio, "tf-models") is None
    assert recipes.location(image, "tf-models") == "tfpipe.domains.image.recipes.tf_models_recipe"
    with pytest.raises(ValueError, match=r"tf-models variant needs the audio domain's .* recipes here: keras"):
        recipes.load(audio, "tf-models")


def test_a_new_recipe_is_one_entry_here_and_one_in_each_domain_that_has_it(monkeypatch):
    from tfpipe.domains.image.recipes import tf_models_recipe

    image = get_domain("image")
    monkeypatch.setitem(recipes.RECIPES, "resnet", recipes.Recipe("ResNet"))
    monkeypatch.setattr(image, "recipes", {**image.recipes, "resnet": "tfpipe.domains.image.recipes:tf_models_recipe"})
    assert recipes.find(get_domain("image"), "resnet") is tf_models_recipe
    assert recipes.find(get_domain("audio"), "resnet") is None


def test_audio_keras_recipe_makes_the_chains_features(tiny):
    import tensorflow as tf

    import tfpipe

    keras_recipe = recipes.load(get_domain("audio"), "keras")
    ours = list(tfpipe.build_dataset(tiny, "eval", PipelineConfig.optimized(batch_size=4), FEAT))
    theirs = list(keras_recipe(tiny, FEAT, batch_size=4, mode="eval"))  # unshuffled: the same file order
    assert [b[1].dtype for b in theirs] == [tf.int64] * 5 and sum(len(b[1]) for b in theirs) == 18
    np.testing.assert_allclose(np.concatenate([b[0]["log_mel"] for b in theirs]),
                               np.concatenate([b[0]["log_mel"] for b in ours]), atol=1e-4)
    np.testing.assert_array_equal(np.concatenate([b[1] for b in theirs]), np.concatenate([b[1] for b in ours]))
    assert int(keras_recipe(tiny, FEAT, batch_size=4, seed=1).cardinality()) == int(tf.data.INFINITE_CARDINALITY)
    assert int(keras_recipe(tiny, FEAT, batch_size=4, seed=1, epochs=2).cardinality()) == 10
    with pytest.raises(ValueError, match="not a folder"):
        keras_recipe(os.path.join(tiny, "missing"), FEAT)
