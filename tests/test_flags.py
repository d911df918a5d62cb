"""absl flags: one per config field, unset keeps the preset, bad values fail at parse time."""

import dataclasses

import pytest
from absl import flags

from tfpipe import flags as tfpipe_flags
from tfpipe.config import PipelineConfig
from tfpipe.domains.audio.config import AudioConfig


def _parse(*args):
    values = flags.FlagValues()
    tfpipe_flags.define_flags(values)
    values(["prog", *args])
    return values


def test_every_config_field_has_a_flag():
    values = _parse()
    for config in (PipelineConfig, AudioConfig):
        for field in dataclasses.fields(config):
            assert field.name in values, field.name
    assert values["fuse_maps"].boolean  # --[no]fuse_maps


def test_unset_flags_keep_the_preset():
    assert tfpipe_flags.pipeline_config(_parse()) == PipelineConfig.optimized()
    assert tfpipe_flags.pipeline_config(_parse("--pipeline=naive")) == PipelineConfig.naive()
    assert tfpipe_flags.feature_config(_parse()) == AudioConfig()


def test_flags_round_trip_into_configs():
    values = _parse("--pipeline=naive", "--prefetch", "--noprefetch_to_device", "--batch_size=16",
                    "--cache=memory", "--seed=3", "--n_mels=40", "--fmax=7000", "--backend=librosa",
                    "--data_service=grpc://localhost:5000")
    assert tfpipe_flags.pipeline_config(values) == PipelineConfig.naive(
        prefetch=True, batch_size=16, cache="memory", seed=3, data_service="grpc://localhost:5000")
    assert tfpipe_flags.feature_config(values) == AudioConfig(n_mels=40, fmax=7000.0, backend="librosa")
    off = tfpipe_flags.pipeline_config(_parse("--nofuse_maps", "--novectorize", "--deterministic"))
    assert off == PipelineConfig.optimized(fuse_maps=False, vectorize=False, deterministic=True)


@pytest.mark.parametrize("args, message", [
    (["--batch_size=0"], r"batch_size=0: 0 is not an integer in the range \[1, "),
    (["--backend=torch"], r"should be one of <tf\|librosa>"),
    (["--pipeline=fast"], r"should be one of <optimized\|naive>"),
    (["--fmax=9000"], r"AudioConfig\.fmax=9000\.0: must be in \(0\.0, 8000\.0\]"),
    (["--data_service=localhost:1"], r"expected 'grpc://HOST:PORT'"),
    (["--fuse_maps=maybe"], r"fuse_maps"),
])
def test_bad_values_are_rejected_at_parse_time(args, message):
    with pytest.raises(flags.Error, match=message):
        _parse(*args)


def _help(values, name):
    """One flag's help line as --help shows it."""
    return values[name].help


def test_help_shows_the_value_an_unset_flag_keeps():
    values = _parse()
    assert "(default: 64; PipelineConfig.batch_size)" in _help(values, "batch_size")
    assert "default: true; naive preset: false; PipelineConfig.prefetch" in _help(values, "prefetch")
    assert "default: 1024; naive preset: 0;" in _help(values, "shuffle_buffer")
    assert "default: true; naive preset: false; PipelineConfig.prefetch_to_device" in _help(values, "prefetch_to_device")
    assert "default: 16000; AudioConfig.sample_rate" in _help(values, "sample_rate")
    assert "default: 64; AudioConfig.n_mels" in _help(values, "n_mels")
    assert "default: 'log_mel'; AudioConfig.output" in _help(values, "features")
    assert _help(values, "seed").endswith("(unset: new order each run). (PipelineConfig.seed)")  # None: said once
    # The absl default stays None: an unset flag is told apart from one set to the preset's value.
    assert values["prefetch"].value is None and values["batch_size"].value is None
    full = values.module_help(tfpipe_flags.__name__)
    assert "--[no]prefetch:" in full and "naive preset: false" in full


def test_the_feature_choice_is_features_and_output_stays_its_alias():
    for args in (["--features=waveform"], ["--output=waveform"], ["--output", "waveform"]):
        values = _parse(*args)
        assert tfpipe_flags.feature_config(values) == AudioConfig(output="waveform"), args
        assert tfpipe_flags.set_fields(AudioConfig, values) == {"output": "waveform"}
    assert tfpipe_flags.flag_name(AudioConfig, "output") == "features"
    assert tfpipe_flags.flag_name(PipelineConfig, "batch_size") == "batch_size"
    with pytest.raises(flags.Error, match=r"--features=foo: value should be one of <log_mel\|waveform>"):
        _parse("--output=foo")


def test_a_binary_with_its_own_output_flag_keeps_it():
    # `tfpipe prepare` style: --output is a folder; --features is still the feature choice, no alias.
    values = flags.FlagValues()
    flags.DEFINE_string("output", None, "Folder.", flag_values=values)
    tfpipe_flags.define_config_flags(AudioConfig, values)
    values(["prog", "--output=/tmp/shards", "--features=waveform", "--n_mels=40"])
    assert values["output"].value == "/tmp/shards"
    assert tfpipe_flags.feature_config(values) == AudioConfig(output="waveform", n_mels=40)
    # Excluding the field leaves neither --features nor a feature meaning for --output.
    values = flags.FlagValues()
    flags.DEFINE_string("output", None, "Folder.", flag_values=values)
    tfpipe_flags.define_config_flags(AudioConfig, values, exclude=("output",))
    values(["prog", "--output=/tmp/shards"])
    assert "features" not in values
    assert tfpipe_flags.feature_config(values, exclude=("output",)) == AudioConfig()


def test_every_registered_domain_brings_its_config_flags_and_a_shared_name_is_one_flag():
    from tfpipe.core.registry import domains

    values = _parse("--height=96", "--dtype=uint8", "--n_mels=40")
    for domain in domains().values():  # flags.py names none: each registered config is asked
        for field in dataclasses.fields(domain.config_class):
            assert tfpipe_flags.flag_name(domain.config_class, field.name) in values, field.name
    image = domains()["image"].config_class
    assert tfpipe_flags.feature_config(values, config_class=image) == image(height=96, dtype="uint8")
    assert tfpipe_flags.feature_config(values) == AudioConfig(n_mels=40)  # the default domain's

    @dataclasses.dataclass(frozen=True)
    class Other:  # a plug-in's config with a field another config has: it shares that flag
        n_mels: int = dataclasses.field(default=8, metadata={"help": "Bands."})

    tfpipe_flags.define_config_flags(Other, values)
    assert tfpipe_flags.set_fields(Other, values) == {"n_mels": 40}
    own = flags.FlagValues()
    flags.DEFINE_string("n_mels", None, "A binary's own flag of that name.", flag_values=own)
    with pytest.raises(flags.DuplicateFlagError):
        tfpipe_flags.define_config_flags(Other, own)  # not a config's flag: a clash, said at once
