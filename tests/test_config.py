"""PipelineConfig / AudioConfig: presets, validation messages, derived shapes."""

import dataclasses

import pytest

from tfpipe.config import TOGGLES, PipelineConfig
from tfpipe.domains.audio.config import AudioConfig


def test_optimized_turns_every_toggle_on_and_naive_off():
    on, off = PipelineConfig.optimized(), PipelineConfig.naive()
    for name in TOGGLES:
        if name == "deterministic":
            continue  # "on" (optimized) means False for this one; checked below
        assert getattr(on, name) is True and getattr(off, name) is False, name
    assert on.deterministic is False and off.deterministic is True
    assert off.shuffle_buffer == 0  # the seed shuffles the whole set
    assert set(TOGGLES) >= {"repeat_before_shuffle", "shuffle_filenames", "fuse_maps", "parallel_map",
                            "parallel_reads", "vectorize", "prefetch", "deterministic", "prefetch_to_device"}


def test_presets_take_overrides_and_configs_are_frozen():
    p = PipelineConfig.naive(prefetch=True, batch_size=8)
    assert p.prefetch and p.batch_size == 8 and not p.fuse_maps
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.batch_size = 3
    assert PipelineConfig.preset("naive") == PipelineConfig.naive()
    with pytest.raises(ValueError, match=r"preset 'fast'.*optimized, naive"):
        PipelineConfig.preset("fast")


@pytest.mark.parametrize("kwargs, message", [
    (dict(batch_size=0), r"PipelineConfig\.batch_size=0: must be >= 1"),
    (dict(batch_size=2.5), r"PipelineConfig\.batch_size=2\.5: expected int"),
    (dict(shuffle_buffer=-1), r"shuffle_buffer=-1: must be >= 0"),
    (dict(fuse_maps="yes"), r"fuse_maps='yes': expected bool"),
    (dict(data_service_mode="all"), r"data_service_mode='all': allowed values are 'distributed_epoch'"),
    (dict(data_service="localhost:5050"), r"data_service='localhost:5050': expected 'grpc://HOST:PORT'"),
    (dict(cycle_length=-1), r"cycle_length=-1: must be >= 0"),
])
def test_pipeline_config_errors_name_field_value_and_range(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PipelineConfig(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    (dict(n_mels=0), r"AudioConfig\.n_mels=0: must be >= 1"),
    (dict(backend="torch"), r"backend='torch': allowed values are 'tf', 'librosa'"),
    (dict(fmax=9000.0), r"fmax=9000\.0: must be in \(0\.0, 8000\.0\]"),
    (dict(fmin=8000.0), r"fmin=8000\.0: must be below sample_rate/2"),
    (dict(hop_length=1024, n_fft=512), r"hop_length=1024: must be <= n_fft=512"),
    (dict(clip_seconds=float("nan")), r"clip_seconds=nan: expected float"),
])
def test_feature_config_errors_name_field_value_and_range(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AudioConfig(**kwargs)


def test_feature_shapes_follow_librosa_centered_frames():
    f = AudioConfig(sample_rate=16000, clip_seconds=1.0, hop_length=160, n_mels=64)
    assert f.num_samples == 16000 and f.num_frames == 101 and f.feature_shape == (101, 64)
    assert AudioConfig(output="waveform", clip_seconds=0.5).feature_shape == (8000,)


def test_bucket_boundaries_take_sequences_or_text_and_must_increase():
    assert PipelineConfig(bucket_boundaries=[50, 100]).bucket_boundaries == (50, 100)
    assert PipelineConfig(bucket_boundaries="50, 100,200").bucket_boundaries == (50, 100, 200)
    assert PipelineConfig().bucket_boundaries == ()
    for bad in ((100, 50), (0, 10), ("a",)):
        with pytest.raises(ValueError, match="PipelineConfig.bucket_boundaries="):
            PipelineConfig(bucket_boundaries=bad)


def test_a_snapshot_cache_needs_a_folder():
    with pytest.raises(ValueError, match=r"cache='snapshot:': name the snapshot folder"):
        PipelineConfig(cache="snapshot:")
    assert PipelineConfig(cache="snapshot:/tmp/x").cache == "snapshot:/tmp/x"
