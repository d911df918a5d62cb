"""bench/specs.py: variant specs parsed into typed variants of the right kind, ablation, baseline (pure)."""

import dataclasses

import pytest

from tfpipe import bench
from tfpipe.bench.variants import PipelineVariant, RecipeVariant, ShardsVariant
from tfpipe.config import TOGGLES, PipelineConfig
from tfpipe.domains.audio.config import AudioConfig
from tfpipe.domains.image.config import ImageConfig

FEAT = AudioConfig(clip_seconds=0.25)


def test_presets_and_typed_overrides():
    v = bench.parse_variant("optimized")
    assert (type(v), v.kind, v.pipeline, v.features, v.changed) == (PipelineVariant, "pipeline",
                                                                      PipelineConfig.optimized(), AudioConfig(), ())
    v = bench.parse_variant("naive:backend=librosa, batch_size=32,fmax=none", FEAT)
    assert v.pipeline == PipelineConfig.naive(batch_size=32)
    assert v.features == dataclasses.replace(FEAT, backend="librosa", fmax=None)
    assert v.changed == ("backend", "batch_size", "fmax")
    v = bench.parse_variant("optimized:fuse_maps=false,prefetch=0,n_mels=40,clip_seconds=0.5,seed=3")
    assert (v.pipeline.fuse_maps, v.pipeline.prefetch, v.pipeline.seed) == (False, False, 3)
    assert (v.features.n_mels, v.features.clip_seconds) == (40, 0.5)
    assert bench.parse_variant("naive:prefetch,nodeterministic").pipeline == PipelineConfig.naive(
        prefetch=True, deterministic=False)  # absl-style bare flags


def test_common_overrides_apply_first_and_the_spec_wins():
    v = bench.parse_variant("naive:batch_size=8", overrides={"batch_size": 16, "n_mels": 32, "prefetch": True})
    assert (v.pipeline.batch_size, v.pipeline.prefetch, v.features.n_mels) == (8, True, 32)
    assert v.changed == ("batch_size",)


def test_recipe_and_shards_specs_make_their_kinds():
    k = bench.parse_variant("keras:batch_size=16,n_mels=40")
    assert (type(k), k.kind, k.recipe, k.pipeline.batch_size, k.features.n_mels) == (
        RecipeVariant, "keras", "keras", 16, 40)
    assert set(k.config()["pipeline"]) == {"recipe", "batch_size", "seed"}
    assert k.config()["pipeline"]["recipe"].startswith("tfpipe.domains.audio.recipes.keras_recipe(data, AudioConfig")
    t = bench.parse_variant("tf-models:height=96", ImageConfig())
    assert (type(t), t.kind, t.features.height) == (RecipeVariant, "tf-models", 96)
    assert t.config()["pipeline"]["recipe"].startswith("tfpipe.domains.image.recipes.tf_models_recipe(")
    s = bench.parse_variant("shards")
    assert (type(s), s.kind, s.pipeline) == (ShardsVariant, "shards", PipelineConfig.optimized())
    s = bench.parse_variant("shards:naive,prefetch=true")
    assert (s.kind, s.pipeline) == ("shards", PipelineConfig.naive(prefetch=True))


@pytest.mark.parametrize("spec, message", [
    ("fast", r"unknown name 'fast'; allowed: optimized, naive, shards, keras, tf-models"),
    ("optimized:fuse=false", r"unknown field 'fuse'; allowed fields: repeat_before_shuffle, .*n_mels"),
    ("optimized:fuse_maps=maybe", r"fuse_maps='maybe': expected true or false"),
    ("naive:batch_size=big", r"batch_size='big': expected an integer"),
    ("naive:clip_seconds=long", r"clip_seconds='long': expected a number"),
    ("naive:backend=torch", r"backend='torch': allowed values are tf, librosa"),
    ("optimized:batch_size=0", r"'optimized:batch_size=0': PipelineConfig.batch_size=0: must be >= 1"),
    ("keras:prefetch=false", r"keras takes only batch_size, seed and AudioConfig fields, not prefetch"),
    ("tf-models:vectorize=false", r"tf-models takes only batch_size, seed and AudioConfig fields, not vectorize"),
    ("optimized:n_mels", r"'n_mels' is not field=value"),
    ("optimized:nofuse", r"'nofuse' is not field=value"),
])
def test_bad_specs_say_what_is_allowed(spec, message):
    with pytest.raises(ValueError, match=message):
        bench.parse_variant(spec)


def test_dataset_fn_specs_are_presets_and_pipeline_fields_only():
    v = bench.parse_variant("naive:prefetch=true", dataset_fn="x.py:f")
    assert (v.kind, v.fn, v.pipeline) == ("dataset_fn", "x.py:f", PipelineConfig.naive(prefetch=True))
    with pytest.raises(ValueError, match=r"variant 'keras': with dataset_fn=.* the variants are the presets"):
        bench.parse_variant("keras", dataset_fn="x.py:f")
    with pytest.raises(ValueError, match=r"n_mels: AudioConfig field\(s\) do not reach a dataset_fn"):
        bench.parse_variant("optimized:n_mels=40", dataset_fn="x.py:f")
    chosen = bench.resolve_variants([], ablation=True, dataset_fn="x.py:f")
    assert {v.kind for v in chosen} == {"dataset_fn"} and len(chosen) == 2 * (len(TOGGLES) + 1)  # no backend flip


def test_split_variants_keeps_overrides_with_their_variant():
    text = "naive,optimized:fuse_maps=false,n_mels=40,keras,tf-models:height=64,shards:naive,noprefetch"
    assert bench.split_variants(text) == [
        "naive", "optimized:fuse_maps=false,n_mels=40", "keras", "tf-models:height=64", "shards:naive,noprefetch"]
    assert bench.split_variants("naive, noprefetch,batch_size=8") == ["naive:noprefetch,batch_size=8"]


def test_resolve_variants_baseline_and_duplicates():
    chosen = bench.resolve_variants(["naive", "optimized", "naive"])
    assert [(v.name, v.reference) for v in chosen] == [("naive", "naive"), ("optimized", "naive")]
    chosen = bench.resolve_variants(["naive", "optimized"], baseline="optimized")
    assert [v.reference for v in chosen] == ["optimized", "optimized"]
    with pytest.raises(ValueError, match="baseline 'keras' is not one of the variants: naive, optimized"):
        bench.resolve_variants(["naive", "optimized"], baseline="keras")
    assert [v.key for v in bench.with_cores(chosen, [1, 2])] == ["naive@1", "naive@2", "optimized@1", "optimized@2"]


def test_ablation_flips_every_toggle_alone_and_the_backend():
    variants = bench.ablation_variants(FEAT)
    by_name = {v.name: v for v in variants}
    assert len(by_name) == len(variants) == 2 * (len(TOGGLES) + 2)
    for preset in ("optimized", "naive"):
        base = by_name[preset]
        flipped = [v for v in variants if v.reference == preset]
        assert sorted(f for v in flipped for f in v.changed) == sorted((*TOGGLES, "backend"))
        for v in flipped:
            (field,) = v.changed
            side = "features" if field == "backend" else "pipeline"
            config, base_config = getattr(v, side), getattr(base, side)
            assert getattr(config, field) != getattr(base_config, field)
            assert dataclasses.replace(config, **{field: getattr(base_config, field)}) == base_config  # nothing else
    assert by_name["optimized:fuse_maps=false"].pipeline.fuse_maps is False
    assert by_name["naive:parallel_map=true"].pipeline.parallel_map is True
    assert by_name["optimized:shuffle_blocks=false"].pipeline.shuffle_blocks is False
    assert by_name["optimized:backend=librosa"].features.backend == "librosa"
    image = bench.ablation_variants(ImageConfig())  # every toggle, and no backend to flip (ImageConfig has none)
    assert len(image) == 2 * (len(TOGGLES) + 1)
    assert all(type(v.features) is ImageConfig and set(v.changed) <= set(TOGGLES) for v in image)
