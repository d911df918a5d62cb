"""bench/domains.py: the data's domain decides the config, the stages and the recipes (images here);
a shard folder's stored config is where variants start.

Tiny image corpora (synthetic JPEG/PNG, or a few JPEGs) in temp dirs; real worker processes.
No speed is asserted: the machine running the tests is shared.
"""

import json
import multiprocessing
import os

import pytest

from tests.bench.conftest import FEAT
from tests.bench.support import PNG_MAGIC
from tests.support import encode, pattern, write
from tfpipe import bench
from tfpipe.bench import domains
from tfpipe.bench.variants import Inputs
from tfpipe.core.registry import get_domain
from tfpipe.core.source import find
from tfpipe.domains.audio.config import AudioConfig
from tfpipe.domains.image import ImageConfig, synthetic
from tfpipe.errors import DataError

IMAGE_STAGES = ("list", "read", "decode", "batch")  # the image domain's stages, list and batch added
SMALL = {"batch_size": 4, "height": 32, "width": 32}


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """8 classes x 3 synthetic images, 32-72 pixels a side, JPEG and PNG."""
    root = tmp_path_factory.mktemp("bench_images") / "images"
    return synthetic.write_corpus(root, per_class=3, size=(32, 72), progress=False).root


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    """2 classes x 4 photos-like JPEGs of 60-95 x 80 pixels (the tf-models recipe reads JPEG only)."""
    root = tmp_path_factory.mktemp("bench_jpegs") / "jpegs"
    for i in range(8):
        write(root / f"c{i % 2}" / f"p{i}.jpg", encode(pattern(60 + 5 * i, 80, seed=i), "JPEG", quality=90))
    return str(root)


def test_a_shard_folders_stored_config_is_the_base_and_flags_edit_it(tiny, tiny_shards):
    audio = get_domain("audio")
    stored = domains.base_features(Inputs(tiny_shards, find(tiny_shards), domain=audio), None, {"n_mels": 32})
    assert (stored.clip_seconds, stored.n_mels) == (0.25, 32)  # from the index, then the override
    beside = Inputs(tiny, find(tiny), tiny_shards, find(tiny_shards), audio)  # wavs compared with their shards
    assert domains.base_features(beside, None, {}).clip_seconds == 0.25
    assert domains.base_features(beside, AudioConfig(), {}).clip_seconds == 1.0  # given features win
    assert domains.base_features(Inputs(tiny, find(tiny), domain=audio), None, {}) == AudioConfig()
    assert domains.base_features(Inputs(), FEAT, {}) == FEAT  # only user functions: any config as given


def test_image_specs_edit_image_config_fields():
    v = bench.parse_variant("optimized:dtype=uint8,height=96,flip=false", ImageConfig())
    assert v.features == ImageConfig(dtype="uint8", height=96, flip=False) and v.kind == "pipeline"
    assert v.changed == ("dtype", "height", "flip")
    k = bench.parse_variant("keras:width=48", ImageConfig(), overrides={"height": 40})
    assert (k.kind, k.features.height, k.features.width) == ("keras", 40, 48)
    assert "ImageConfig" in k.config()["pipeline"]["recipe"] and k.config()["features"]["width"] == 48
    with pytest.raises(ValueError, match=r"unknown field 'n_mels'; allowed fields: .*height, width, dtype"):
        bench.parse_variant("optimized:n_mels=40", ImageConfig())
    with pytest.raises(ValueError, match=r"dtype='float16': allowed values are float32, uint8"):
        bench.parse_variant("optimized:dtype=float16", ImageConfig())
    with pytest.raises(ValueError, match=r"keras takes only batch_size, seed and ImageConfig fields, not prefetch"):
        bench.parse_variant("keras:prefetch=false", ImageConfig())


def test_image_data_refuses_another_domains_fields_before_starting_workers(images, tmp_path):
    with pytest.raises(ValueError, match=r"n_mels: not fields of ImageConfig, the features of the image data in "
                                         r".*images.*; its fields are .*dtype, eval_crop, .*flip, height"):
        bench.run(images, ["optimized"], overrides={"n_mels": 40}, progress=False)
    with pytest.raises(ValueError, match=r"features=AudioConfig\(\.\.\.\) but the data is image .*ImageConfig"):
        bench.run(images, ["optimized"], features=AudioConfig(), progress=False)
    manifest = tmp_path / "images.csv"  # a CSV of the same images: no class folders for a recipe
    paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(images) for f in fs if f.endswith((".jpg", ".png")))
    manifest.write_text("path,label\n" + "".join(f"{p},{os.path.basename(os.path.dirname(p))}\n" for p in paths))
    # A recipe that cannot read the data is skipped (below); with nothing left, the run says why, up front.
    with pytest.raises(ValueError, match=r"no variant can read the data: keras: .*the keras variant reads a folder "
                                         r"with one subfolder per class"):
        bench.run(str(manifest), ["keras"], progress=False)
    assert multiprocessing.active_children() == []


def test_a_recipe_that_refuses_the_data_is_skipped_with_its_reason_and_the_rest_is_timed(images):
    # synth's image corpus has PNGs, which the tf-models recipe refuses (JPEG only): the bench goes on without it.
    result = bench.run(images, ["tf-models", "optimized", "naive"], batches=1, repeats=2, warmup=0, overrides=SMALL,
                       stages=False, progress=False)
    assert multiprocessing.active_children() == []
    assert [(v.name, v.reference) for v in result.variants] == [("optimized", "optimized"), ("naive", "optimized")]
    (reason,) = result.skipped.values()
    assert list(result.skipped) == ["tf-models"] and "files are not JPEG" in reason
    assert "the tf-models recipe decodes JPEG only" in reason and not reason.startswith("variant")
    assert f"skipped tf-models: {reason}" in result.table().splitlines()
    assert json.loads(result.to_json())["skipped"] == {"tf-models": reason}


def test_bad_image_fails_up_front_naming_the_variant(tmp_path):
    root = tmp_path / "bad"
    synthetic.write_corpus(root, per_class=1, size=(32, 40), progress=False)
    (root / "circle" / "truncated.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    with pytest.raises(DataError, match=r"(?s)variant 'naive', 'optimized'.*truncated\.jpg"):
        bench.run(str(root), ["naive", "optimized"], overrides=SMALL, progress=False)
    assert multiprocessing.active_children() == []


def test_bench_times_naive_optimized_and_both_recipes_on_an_image_folder(jpegs, tmp_path):
    result = bench.run(jpegs, ["naive", "optimized", "keras", "tf-models"], batches=2, repeats=2, warmup=0,
                       overrides=SMALL, stage_seconds=0.05, progress=False)
    assert multiprocessing.active_children() == []
    assert result.settings["domain"] == "image" and result.settings["num_examples"] == 8
    assert [(v.name, v.kind) for v in result.variants] == [("naive", "pipeline"), ("optimized", "pipeline"),
                                                           ("keras", "keras"), ("tf-models", "tf-models")]
    for v in result.variants:
        assert [(t.batches, t.examples) for t in v.turns] == [(2, 8), (2, 8)]
        assert v.config["features"] == {**v.config["features"], "height": 32, "width": 32, "dtype": "float32"}
        # Every variant, each recipe's included, yields the image domain's batches.
        assert v.batch_spec == "({'image': float32[4, 32, 32, 3]}, int64[4])", v.batch_spec
    keras, tf_models = result["keras"], result["tf-models"]
    assert keras.note == "Keras recipe" and set(keras.config["pipeline"]) == {"recipe", "batch_size", "seed"}
    assert tf_models.note == "tensorflow/models ResNet recipe"
    assert tf_models.config["pipeline"]["recipe"].startswith("tfpipe.domains.image.recipes.tf_models_recipe(")
    # The stage report times the image domain's own stages, names the limit (the decode limit, as a rule).
    (stage,) = result.stages
    assert (stage.label, stage.names, stage.batch_size) == ("image features", IMAGE_STAGES, 4)
    assert stage.limiting in IMAGE_STAGES and all(r > 0 for r in stage.rates)
    # Nothing of the image chain runs on whole batches: the dtype is made per image, in cache.
    assert stage.fused_rate > 0 and stage.vectorized_rate is None and stage.batched == 0
    assert all(v.ideal == stage.ideal for v in result.variants)  # one config, one batch size
    text = result.table()
    assert "stages (image features, one thread" in text
    assert f"limit = {stage.limiting} alone on one thread" in text
    rows = [line.split()[0] for line in text.splitlines() if line.startswith("  ") and line.split()
            and line.split()[0] in IMAGE_STAGES and "whole batches" not in line]
    assert rows == list(IMAGE_STAGES)
    assert "limits the pipeline" in next(line for line in text.splitlines() if line.split()[:1] == [stage.limiting])
    data = json.loads(result.to_json())
    assert [s["name"] for s in data["stages"][0]["stages"]] == list(IMAGE_STAGES)
    assert data["stages"][0]["features"]["height"] == 32
    result.plot(str(tmp_path / "images.png"))
    assert (tmp_path / "images.png").read_bytes()[:8] == PNG_MAGIC
