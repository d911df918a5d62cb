"""Old names and module paths keep working through tfpipe.compat, each with a DeprecationWarning naming its new home."""

import importlib
import subprocess
import sys

import pytest

import tfpipe
from tfpipe import compat
from tfpipe.domains.audio.config import AudioConfig
from tfpipe.errors import DataError


@pytest.mark.parametrize("old_module,names", sorted(compat.MOVED_NAMES.items()))
def test_every_old_name_resolves_to_its_new_home_with_a_warning(old_module, names):
    module = importlib.import_module(old_module)
    for name, target in names.items():
        new_module, _, attr = target.partition(":")
        with pytest.warns(DeprecationWarning, match=f"{old_module}.{name} is deprecated: use {new_module}.{attr}"):
            value = getattr(module, name)
        assert value is getattr(importlib.import_module(new_module), attr)


@pytest.mark.parametrize("old,new", sorted(compat.MOVED_MODULES.items()))
def test_whole_moved_modules_serve_every_public_name_of_the_new_one(old, new):
    old_module, new_module = importlib.import_module(old), importlib.import_module(new)
    public = [n for n in dir(new_module) if not n.startswith("_")]
    assert public
    with pytest.warns(DeprecationWarning):
        for name in public:
            assert getattr(old_module, name) is getattr(new_module, name)


def test_the_v1_names_still_work():
    with pytest.warns(DeprecationWarning, match="use tfpipe.domains.audio.config.AudioConfig"):
        assert tfpipe.FeatureConfig(n_mels=40) == AudioConfig(n_mels=40)
    with pytest.warns(DeprecationWarning):
        from tfpipe.shards import write_shards
    assert write_shards is tfpipe.write_shards
    with pytest.warns(DeprecationWarning), pytest.raises(DataError, match="retired.*--runner=beam"):
        tfpipe.merge_index("out/")


def test_an_unknown_name_of_an_old_module_is_an_attribute_error():
    shards = importlib.import_module("tfpipe.shards")
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        shards.nothing  # noqa: B018


def test_no_old_module_has_a_file_and_tfpipe_itself_imports_no_old_path():
    for old in list(compat.MOVED_MODULES) + [m for m in compat.MOVED_NAMES if m != "tfpipe"]:
        spec = importlib.util.find_spec(old)
        assert spec.origin is None, f"{old} has a file again: {spec.origin}"
    code = ("import warnings, tfpipe; warnings.simplefilter('error', DeprecationWarning); "
            "from tfpipe.core.chain import build_dataset; import tfpipe.storage.writer, tfpipe.bench, "
            "tfpipe.cli.data, tfpipe.cli.bench, tfpipe.service_bench, tfpipe.estimator")
    subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code], check=True)
