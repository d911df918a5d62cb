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


@pytest.mark.parametrize("module,names", sorted(compat.MOVED_OUT.items()))
def test_names_that_left_a_module_still_resolve_on_it_with_a_warning(module, names):
    kept = importlib.import_module(module)
    for name, target in names.items():
        new_module, _, attr = target.partition(":")
        with pytest.warns(DeprecationWarning, match=f"{module}.{name} is deprecated: use {new_module}.{attr}"):
            value = getattr(kept, name)
        assert value is getattr(importlib.import_module(new_module), attr)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        kept.nothing  # noqa: B018


@pytest.mark.parametrize("old,homes", sorted(compat.MOVED_INTO_PACKAGES.items()))
def test_an_old_module_that_is_a_package_now_serves_its_old_names_and_its_submodules(old, homes):
    package = importlib.import_module(old)
    for new in homes:
        new_module = importlib.import_module(new)
        own = [n for n, v in vars(new_module).items() if not n.startswith("_") and getattr(v, "__module__", "") == new]
        with pytest.warns(DeprecationWarning, match=f"{old}.{own[0]} is deprecated: use {new}.{own[0]}"):
            assert getattr(package, own[0]) is getattr(new_module, own[0])
    assert package.__spec__.origin.endswith("__init__.py")
    code = (f"import warnings, sys; warnings.simplefilter('error', DeprecationWarning); import tfpipe; "
            f"from {old} import ports; assert 'tensorflow' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)  # a submodule: no warning, no TensorFlow


@pytest.mark.parametrize("public,home", sorted(compat.PUBLIC_MODULES.items()))
def test_public_module_paths_are_their_new_modules_without_a_warning(public, home):
    code = (f"import warnings, sys; warnings.simplefilter('error'); import {public}, {home}; "
            f"assert sys.modules[{public!r}] is {home}; assert {public}.__spec__.name == {home!r}")
    subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code], check=True)


def test_the_public_training_names_keep_working():
    import tfpipe.estimator
    from tfpipe.keras import InputWaitCallback
    from tfpipe.train import keras, wait_hook

    assert tfpipe.estimator.InputWaitHook is wait_hook.InputWaitHook
    assert tfpipe.estimator.make_input_fn is tfpipe.make_input_fn
    assert InputWaitCallback is keras.InputWaitCallback


def test_an_unknown_name_of_an_old_module_is_an_attribute_error():
    shards = importlib.import_module("tfpipe.shards")
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        shards.nothing  # noqa: B018


def test_no_old_module_has_a_file_and_tfpipe_itself_imports_no_old_path():
    import os

    from tests.support import ROOT

    for old in list(compat.MOVED_MODULES) + list(compat.PUBLIC_MODULES) + [m for m in compat.MOVED_NAMES
                                                                           if m != "tfpipe"]:
        spec = importlib.util.find_spec(old)
        assert spec.origin is None or spec.name != old, f"{old} is found at {spec.origin}"
        path = os.path.join(ROOT, *old.split("."))
        for file in (f"{path}.py", os.path.join(path, "__init__.py")):
            assert not os.path.exists(file), f"{old} has a file again: {file}"
    code = ("import warnings, tfpipe; warnings.simplefilter('error', DeprecationWarning); "
            "from tfpipe.core.chain import build_dataset; import tfpipe.storage.writer, tfpipe.bench, "
            "tfpipe.cli.data, tfpipe.cli.bench, tfpipe.service.bench, tfpipe.estimator")
    subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code], check=True)


def test_no_code_of_the_project_uses_an_old_path_even_inside_a_function():
    import ast
    import os

    from tests.support import ROOT

    old = set(compat.MOVED_MODULES) | {m for m in compat.MOVED_NAMES if m != "tfpipe"}
    for package, homes in compat.MOVED_INTO_PACKAGES.items():  # tfpipe.service.distribute: an old name
        old |= {f"{package}.{n}" for new in homes for n in dir(importlib.import_module(new)) if not n.startswith("_")}
    old |= {f"{module}.{n}" for module, names in compat.MOVED_OUT.items() for n in names}
    offenders = []
    for top in ("tfpipe", "estimator_demo", "tests", "docs"):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                path = os.path.join(folder, name)
                if not name.endswith(".py") or path.endswith(("tfpipe/compat.py", "tests/test_compat.py")):
                    continue
                for node in ast.walk(ast.parse(open(path).read())):
                    used = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                            [f"{node.module}.{a.name}" for a in node.names] + [node.module or ""]
                            if isinstance(node, ast.ImportFrom) else [])
                    used += [f"tfpipe.{node.attr}"] if (isinstance(node, ast.Attribute) and isinstance(
                        node.value, ast.Name) and node.value.id == "tfpipe") else []
                    bad = [u for u in used if u in old or u in ("tfpipe.FeatureConfig", "tfpipe.find_examples")]
                    offenders += [f"{os.path.relpath(path, ROOT)}:{node.lineno}: {b}" for b in bad]
    assert not offenders, "\n".join(offenders)
