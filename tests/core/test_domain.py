"""Domain and Offline are ABCs: what a domain must implement fails at instantiation; the shared helpers."""

import dataclasses

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
