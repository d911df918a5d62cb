"""The matrix's data, written once per test session (tens of examples per source kind)."""

import dataclasses

import pytest

import tfpipe
from tests.conformance import world

# Positions are compared exactly, so parallel maps keep their order (deterministic=False lets
# neighbours swap, which can move an example across an epoch boundary).
_OPT = tfpipe.PipelineConfig.optimized(batch_size=world.BATCH, seed=3, deterministic=True)
PRESETS = {
    "naive": tfpipe.PipelineConfig.naive(batch_size=world.BATCH),
    "optimized": _OPT,
    "buckets": dataclasses.replace(_OPT, bucket_boundaries=(2, 4)),
    "cache": dataclasses.replace(_OPT, cache="memory"),
    "snapshot": _OPT,  # cache="snapshot:<a folder of the test's own>", set by preset()
}
KINDS = ("wav", "image", "csv", "files+fns", "shards-v1", "shards-v2", "records+spec", "records+process",
         "records+image", "tfds", "mixture")


@pytest.fixture(scope="session")
def kinds(tmp_path_factory):
    return world.build(tmp_path_factory.mktemp("conformance"))


@pytest.fixture(autouse=True)
def _scan_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TFPIPE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "scan-cache"))


def preset(name, tmp_path, **changes):
    """PRESETS[name], a snapshot in a folder of the test's own, with `changes`."""
    p = PRESETS[name]
    if name == "snapshot":
        p = dataclasses.replace(p, cache=f"snapshot:{tmp_path / 'snapshot'}")
    return dataclasses.replace(p, **changes)
