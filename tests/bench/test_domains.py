"""tfpipe bench on image folders: the domain decides the config, the stages and the Keras recipe.

Tiny synthetic image corpora (24 small JPEG/PNG files) in temp dirs; real worker processes.
No speed is asserted: the machine running the tests is shared.
"""

import json
import multiprocessing
import os
import subprocess
import sys

import pytest

from tfpipe import bench
from tfpipe.config import TOGGLES
from tfpipe.domains.audio.config import AudioConfig
from tfpipe.domains.image import ImageConfig, synthetic
from tfpipe.errors import DataError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
IMAGE_STAGES = ("list", "read", "decode", "scale", "batch")  # the image domain's stages, list and batch added
SMALL = {"batch_size": 4, "height": 32, "width": 32}


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """8 classes x 3 synthetic images, 32-72 pixels a side, JPEG and PNG."""
    root = tmp_path_factory.mktemp("bench_images") / "images"
    return synthetic.write_corpus(root, per_class=3, size=(32, 72), progress=False).root


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
    # Ablation: every toggle, and no backend to flip (ImageConfig has none).
    chosen = bench.ablation_variants(ImageConfig())
    assert len(chosen) == 2 * (len(TOGGLES) + 1)
    assert all(type(v.features) is ImageConfig and set(v.changed) <= set(TOGGLES) for v in chosen)


def test_image_data_refuses_another_domains_fields_before_starting_workers(images, tmp_path):
    with pytest.raises(ValueError, match=r"n_mels: not fields of ImageConfig, the features of the image data in "
                                         r".*images.*; its fields are .*dtype, eval_crop, .*flip, height"):
        bench.run(images, ["optimized"], overrides={"n_mels": 40}, progress=False)
    with pytest.raises(ValueError, match=r"features=AudioConfig\(\.\.\.\) but the data is image .*ImageConfig"):
        bench.run(images, ["optimized"], features=AudioConfig(), progress=False)
    manifest = tmp_path / "images.csv"
    paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(images) for f in fs if f.endswith((".jpg", ".png")))
    manifest.write_text("path,label\n" + "".join(f"{p},{os.path.basename(os.path.dirname(p))}\n" for p in paths))
    with pytest.raises(ValueError, match=r"the keras variant reads a folder with one subfolder per class"):
        bench.run(str(manifest), ["optimized", "keras"], progress=False)
    assert multiprocessing.active_children() == []


def test_bad_image_fails_up_front_naming_the_variant(tmp_path):
    root = tmp_path / "bad"
    synthetic.write_corpus(root, per_class=1, size=(32, 40), progress=False)
    (root / "circle" / "truncated.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    with pytest.raises(DataError, match=r"(?s)variant 'naive', 'optimized'.*truncated\.jpg"):
        bench.run(str(root), ["naive", "optimized"], overrides=SMALL, progress=False)
    assert multiprocessing.active_children() == []


def test_bench_times_naive_optimized_and_keras_on_an_image_folder(images, tmp_path):
    result = bench.run(images, ["naive", "optimized", "keras"], batches=2, repeats=2, warmup=0, overrides=SMALL,
                       stage_seconds=0.05, progress=False)
    assert multiprocessing.active_children() == []
    assert result.settings["domain"] == "image" and result.settings["num_examples"] == 24
    assert [(v.name, v.kind) for v in result.variants] == [("naive", "pipeline"), ("optimized", "pipeline"),
                                                           ("keras", "keras")]
    for v in result.variants:
        assert [(t.batches, t.examples) for t in v.turns] == [(2, 8), (2, 8)]
        assert v.config["features"] == {**v.config["features"], "height": 32, "width": 32, "dtype": "float32"}
        # Every variant, Keras' included, yields the image domain's batches.
        assert v.batch_spec == "({'image': float32[4, 32, 32, 3]}, int64[4])", v.batch_spec
    keras = result["keras"]
    assert keras.note == "Keras recipe" and set(keras.config["pipeline"]) == {"recipe", "batch_size", "seed"}
    # The stage report times the image domain's own stages, names the limit and gives the ideal.
    (stage,) = result.stages
    assert (stage.label, stage.names, stage.batch_size) == ("image features", IMAGE_STAGES, 4)
    assert stage.limiting in IMAGE_STAGES and all(r > 0 for r in stage.rates)
    assert stage.fused_rate > 0 and stage.vectorized_rate > 0  # scale is batchable: runs on whole batches
    assert all(v.ideal == stage.ideal for v in result.variants)  # one config, one batch size
    text = result.table()
    assert "stages (image features, one thread" in text
    rows = [line.split()[0] for line in text.splitlines() if line.startswith("  ") and line.split()
            and line.split()[0] in IMAGE_STAGES]
    assert rows == list(IMAGE_STAGES)
    assert "limits the pipeline" in next(line for line in text.splitlines() if line.split()[:1] == [stage.limiting])
    data = json.loads(result.to_json())
    assert [s["name"] for s in data["stages"][0]["stages"]] == list(IMAGE_STAGES)
    assert data["stages"][0]["features"]["height"] == 32
    result.plot(str(tmp_path / "images.png"))
    assert (tmp_path / "images.png").read_bytes()[:8] == PNG_MAGIC


def test_cli_image_fields_reach_each_variants_worker(images, tmp_path):
    # --height/--width apply to every variant; optimized:dtype=uint8 only to its own; two configs, two stage reports.
    out = tmp_path / "b.json"
    tfpipe_script = os.path.join(os.path.dirname(sys.executable), "tfpipe")
    done = subprocess.run([tfpipe_script, "bench", "--noprogress", "--data", images,
                           "--variants", "optimized:dtype=uint8,keras", "--height", "32", "--width", "40",
                           "--batch_size", "4", "--batches", "1", "--repeats", "1", "--warmup", "0",
                           "--stage_seconds", "0.05", "--json", str(out)],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(out.read_text())
    uint8, keras = data["variants"]
    assert uint8["batch_spec"] == "({'image': uint8[4, 32, 40, 3]}, int64[4])"
    assert keras["batch_spec"] == "({'image': float32[4, 32, 40, 3]}, int64[4])"
    assert (uint8["config"]["features"]["dtype"], keras["config"]["features"]["dtype"]) == ("uint8", "float32")
    assert [s["label"] for s in data["stages"]] == ["dtype=uint8", "dtype=float32"]
    assert "stages (dtype=uint8, one thread" in done.stdout and "Found" not in done.stdout  # Keras' print hidden
    bad = subprocess.run([tfpipe_script, "bench", "--noprogress", "--data", images, "--n_mels", "40"],
                         capture_output=True, text=True, timeout=240)
    assert bad.returncode == 1 and "n_mels: not fields of ImageConfig" in bad.stderr
