"""Domain and Offline are ABCs: what a domain must implement fails at instantiation; the shared helpers."""

import dataclasses
import os

import pytest

from tfpipe.config import config_field, validate
from tfpipe.core.domain import Domain, Offline, Schema, check_stored_fields
from tfpipe.core.registry import domains
from tfpipe.errors import DataError


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    size: int = config_field(4, "Size.", min=1)
    colour: str = config_field("red", "Colour.")

    def __post_init__(self):
        validate(self)


class ToyDomain(Domain):
    name, extensions, config_class, kind = "toy", (".toy",), ToyConfig, "toy"

    def stages(self, config, mode):
        return []

    def offline(self, config, store):
        return None

    def stores(self):
        return ("raw",)

    def serving_receiver(self, config):
        return {}, {}


def test_a_domain_missing_a_method_cannot_be_made():
    class Incomplete(Domain):
        name = "half"

        def stages(self, config, mode):
            return []

    with pytest.raises(TypeError, match=r"abstract methods.*offline.*serving_receiver.*stores"):
        Incomplete()

    class NoFeaturize(Offline):
        schema = Schema({"x": ("float32", (1,))})

        def load(self, path):
            return path

    with pytest.raises(TypeError, match=r"abstract method.*featurize"):
        NoFeaturize()


def test_the_built_in_domains_are_complete_domains():
    found = domains()
    assert {"audio", "image"} <= set(found)
    assert all(isinstance(d, Domain) for d in found.values())


def test_config_checks_the_domain_and_defaults():
    toy = ToyDomain()
    assert toy.config() == ToyConfig() and toy.config(ToyConfig(size=2)).size == 2
    with pytest.raises(ValueError, match=r"features=int\(\.\.\.\) but the data is toy \(\.toy files\): pass a ToyConfig"):
        toy.config(3)
    assert toy.config_from_dict({"size": 7, "retired_field": 1}) == ToyConfig(size=7)  # unknown fields ignored
    assert toy.file_table(["a.toy"], ToyConfig()) == ["a.toy"]
    assert toy.stored_stages({}, ToyConfig()) == []


def test_check_stored_fields_names_each_difference_and_the_flags_that_match():
    check_stored_fields({"size": 4, "colour": "red"}, ToyConfig(), ("size", "colour"), "idx.json")
    with pytest.raises(DataError) as error:
        check_stored_fields({"size": 8, "colour": "blue"}, ToyConfig(), ("size", "colour"), "idx.json")
    message = str(error.value)
    assert message.startswith("idx.json: the shards were written with size=8 (pipeline asks for 4), "
                              "colour='blue' (pipeline asks for 'red')")
    assert message.endswith("(--size 8 --colour blue)")


@dataclasses.dataclass(frozen=True)
class ToyCorpusConfig:
    size: int = config_field(2, "Size.", min=1)
    seed_words: str = config_field("x", "Words.")


def write_toy(out_dir, *, per_class, seed, progress, size, seed_words):
    """A corpus writer as Corpus.writer names it (module:function)."""
    import os

    for name in ("a", "b"):
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
        for i in range(per_class):
            with open(os.path.join(out_dir, name, f"{i}.toy"), "w") as f:
                f.write(seed_words * size)
    return out_dir


def test_a_corpus_writes_with_its_settings_and_follows_the_domain_config(tmp_path):
    from tfpipe.core.domain import Corpus

    corpus = Corpus(f"{__name__}:write_toy", ToyCorpusConfig, "two classes of toys")
    assert corpus.settings_for(ToyConfig(size=7)) == ToyCorpusConfig(size=7)  # a field of one name follows
    out = corpus.write(str(tmp_path / "c"), per_class=2, settings=ToyCorpusConfig(seed_words="ab"))
    assert sorted(os.listdir(out)) == ["a", "b"] and open(os.path.join(out, "a", "1.toy")).read() == "abab"


def test_what_a_domain_need_not_carry_has_defaults():
    toy = ToyDomain()
    assert (toy.default, toy.corpus, dict(toy.recipes), toy.training_store, toy.shards_for_training) == (
        False, None, {}, "", False)
    assert toy.recipe("keras") is None
    with pytest.raises(NotImplementedError, match="the toy domain does not say what a client sends"):
        toy.serving_inputs(["a.toy"], ToyConfig())


def test_the_default_model_input_is_one_standardized_nhwc_tensor():
    import numpy as np
    import tensorflow as tf

    x = ToyDomain().model_input({"v": tf.constant(np.arange(24, dtype=np.float32).reshape(2, 3, 4))}, ToyConfig())
    assert x.shape == (2, 3, 4, 1)
    np.testing.assert_allclose(tf.reduce_mean(x, axis=[1, 2, 3]).numpy(), [0, 0], atol=1e-5)
    with pytest.raises(ValueError, match="model_input takes one feature"):
        ToyDomain().model_input({"a": tf.zeros([1, 2, 2]), "b": tf.zeros([1, 2, 2])}, ToyConfig())
