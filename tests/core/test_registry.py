"""The one registry: a name registered twice is refused with a KeyError naming it, unless replace=True."""

import pytest

from tfpipe.core import registry


@pytest.fixture
def saved_registry():
    """The registry's tables as they were, put back after the test."""
    registry.folder_readers()  # every built-in plug-in registered first (domains() loads the domains only)
    tables = (registry._DOMAINS, registry._FOLDER_READERS, registry._DISTRIBUTOR)  # pylint: disable=protected-access
    saved = [dict(t) for t in tables]
    yield
    for table, before in zip(tables, saved):
        table.clear()
        table.update(before)


def test_a_second_domain_of_a_name_is_refused_unless_replaced(saved_registry):
    audio = registry.get_domain("audio")
    with pytest.raises(KeyError, match="domain 'audio' was already registered.*replace=True"):
        registry.register_domain(audio)
    assert registry.register_domain(audio, replace=True) is audio
    assert registry.get_domain("audio") is audio


def test_folder_readers_are_named_by_their_function_and_refused_twice(saved_registry):
    def reader(folder):
        return None

    registry.register_folder_reader(reader)
    assert registry.folder_readers()[-1] is reader
    with pytest.raises(KeyError, match=r"folder reader '.*test_registry\..*reader' was already registered"):
        registry.register_folder_reader(reader)
    registry.register_folder_reader(reader, name="mine")
    assert registry.folder_readers()[-2:] == [reader, reader]


def test_the_distributor_slot_is_refused_twice_unless_replaced(saved_registry):
    built_in = registry.distributor()
    assert built_in is not None  # tfpipe.service.client, declared by the package's top

    def other(ds, pipeline):
        return ds

    with pytest.raises(KeyError, match="data-service 'distributor' was already registered"):
        registry.register_distributor(other)
    registry.register_distributor(other, replace=True)
    assert registry.distributor() is other


def test_the_default_domain_is_the_one_that_says_so_and_configs_name_their_domain(saved_registry):
    import tfpipe

    audio, image = registry.get_domain("audio"), registry.get_domain("image")
    assert registry.default_domain() is audio and audio.default and not image.default
    assert registry.domain_of_config(tfpipe.ImageConfig()) is image
    assert registry.domain_of_config(None) is audio
    with pytest.raises(ValueError, match=r"int: no registered domain has this config class"):
        registry.domain_of_config(3)
