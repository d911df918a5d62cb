"""absl flags: one per config field, unset keeps the preset, bad values fail at parse time."""

import dataclasses

import pytest
from absl import flags

from tfpipe import flags as tfpipe_flags
from tfpipe.config import FeatureConfig, PipelineConfig


def _parse(*args):
    values = flags.FlagValues()
    tfpipe_flags.define_flags(values)
    values(["prog", *args])
    return values


def test_every_config_field_has_a_flag():
    values = _parse()
    for config in (PipelineConfig, FeatureConfig):
        for field in dataclasses.fields(config):
            assert field.name in values, field.name
    assert values["fuse_maps"].boolean  # --[no]fuse_maps


def test_unset_flags_keep_the_preset():
    assert tfpipe_flags.pipeline_config(_parse()) == PipelineConfig.optimized()
    assert tfpipe_flags.pipeline_config(_parse("--pipeline=naive")) == PipelineConfig.naive()
    assert tfpipe_flags.feature_config(_parse()) == FeatureConfig()


def test_flags_round_trip_into_configs():
    values = _parse("--pipeline=naive", "--prefetch", "--noprefetch_to_device", "--batch_size=16",
                    "--cache=memory", "--seed=3", "--n_mels=40", "--fmax=7000", "--backend=librosa",
                    "--data_service=grpc://localhost:5000")
    assert tfpipe_flags.pipeline_config(values) == PipelineConfig.naive(
        prefetch=True, batch_size=16, cache="memory", seed=3, data_service="grpc://localhost:5000")
    assert tfpipe_flags.feature_config(values) == FeatureConfig(n_mels=40, fmax=7000.0, backend="librosa")
    off = tfpipe_flags.pipeline_config(_parse("--nofuse_maps", "--novectorize", "--deterministic"))
    assert off == PipelineConfig.optimized(fuse_maps=False, vectorize=False, deterministic=True)


@pytest.mark.parametrize("args, message", [
    (["--batch_size=0"], r"batch_size=0: 0 is not an integer in the range \[1, "),
    (["--backend=torch"], r"should be one of <tf\|librosa>"),
    (["--pipeline=fast"], r"should be one of <optimized\|naive>"),
    (["--fmax=9000"], r"FeatureConfig\.fmax=9000\.0: must be in \(0\.0, 8000\.0\]"),
    (["--data_service=localhost:1"], r"expected 'grpc://HOST:PORT'"),
    (["--fuse_maps=maybe"], r"fuse_maps"),
])
def test_bad_values_are_rejected_at_parse_time(args, message):
    with pytest.raises(flags.Error, match=message):
        _parse(*args)
