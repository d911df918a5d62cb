"""The image domain through the one chain: found from the files, every toggle, eval exactly once,
stored-shard stages, the serving signature, the Keras recipe, the synthetic corpus, ImageConfig."""

import dataclasses
import os

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tests.support import encode, pattern, write
from tfpipe.config import TOGGLES, PipelineConfig
from tfpipe.domains.audio.config import AudioConfig
from tfpipe.core.registry import get_domain
from tfpipe.domains.image import synthetic
from tfpipe.domains.image.config import ImageConfig
from tfpipe.domains.image.recipes import keras_recipe
from tfpipe.errors import DataError
from tfpipe.train.estimator import serving_input_receiver_fn

CONFIG = ImageConfig(height=16, width=24)
OPT = PipelineConfig.optimized(batch_size=5, seed=0)
NAIVE = PipelineConfig.naive(batch_size=5, seed=0)
N_IMAGES = 13


def numbered_folder(root):
    """13 flat-colour images in 3 classes, image i with red = 10 i + 5; mixed sizes, JPEG and PNG, a gray one."""
    for i in range(N_IMAGES):
        size = (20 + 7 * i, 30 + 5 * (i % 4))
        pixels = np.zeros((*size, 3), np.uint8) + np.array([10 * i + 5, 128, 60], np.uint8)
        fmt = "PNG" if i % 3 else "JPEG"
        ext = ".png" if fmt == "PNG" else ".jpg"
        options = {"quality": 95} if fmt == "JPEG" else {}
        write(root / f"c{i % 3}" / f"img{i:02d}{ext}", encode(pixels, fmt, **options))
    write(root / "c1" / "gray.png", encode(pattern(30, 30), "PNG", "L"))
    return str(root)


def _ids(images):
    """Recovers each image's number from its red channel."""
    return [int(round((float(np.median(im[..., 0])) * (255.0 if im.dtype != np.uint8 else 1.0) - 5) / 10))
            for im in images]


def _eval(data, pipeline=OPT, features=CONFIG):
    return list(tfpipe.build_dataset(data, "eval", pipeline, features).as_numpy_iterator())


def test_an_image_folder_is_found_by_extension_and_yields_image_batches(tmp_path):
    data = numbered_folder(tmp_path / "imgs")
    source = tfpipe.find(data)
    assert source.kind == "image" and source.class_names == ("c0", "c1", "c2")
    features, labels = next(iter(tfpipe.build_dataset(data, "train", OPT, CONFIG)))
    assert features["image"].shape == (5, 16, 24, 3) and features["image"].dtype == tf.float32
    assert labels.dtype == tf.int64
    assert 0.0 <= float(tf.reduce_min(features["image"])) and float(tf.reduce_max(features["image"])) <= 1.0
    default, _ = next(iter(tfpipe.build_dataset(data, "eval", OPT)))  # features= unset: ImageConfig()
    assert default["image"].shape[1:] == (64, 64, 3)
    as_bytes, _ = next(iter(tfpipe.build_dataset(data, "eval", OPT, dataclasses.replace(CONFIG, dtype="uint8"))))
    assert as_bytes["image"].dtype == tf.uint8
    np.testing.assert_allclose(as_bytes["image"].numpy() / 255.0, _eval(data)[0][0]["image"], atol=1e-6)
    with pytest.raises(ValueError, match=r"features=AudioConfig\(\.\.\.\) but the data is image.*ImageConfig"):
        tfpipe.build_dataset(data, "eval", OPT, AudioConfig())


def test_eval_yields_every_image_exactly_once_in_order_with_the_last_partial_batch(tmp_path):
    data = numbered_folder(tmp_path / "imgs")
    batches = _eval(data)
    assert [len(labels) for _, labels in batches] == [5, 5, 4]  # 14 files: the partial batch is kept
    images = np.concatenate([f["image"] for f, _ in batches])
    labels = np.concatenate([l for _, l in batches])
    source = tfpipe.find(data)
    numbered = [i for i, p in enumerate(source.paths) if "gray" not in p]
    ids = _ids(images[numbered])
    assert sorted(ids) == list(range(N_IMAGES))  # each once
    assert [int(os.path.basename(source.paths[i])[3:5]) for i in numbered] == ids  # in the source's order
    np.testing.assert_array_equal(labels, source.labels)


@pytest.mark.parametrize("toggle", TOGGLES + ("cache",))
def test_each_toggle_changes_speed_not_results(tmp_path, toggle):
    data = numbered_folder(tmp_path / "imgs")
    value = "memory" if toggle == "cache" else getattr(NAIVE, toggle)
    flipped = dataclasses.replace(OPT, **{toggle: value if value != getattr(OPT, toggle) else not value})
    base, other = _eval(data), _eval(data, flipped)
    assert len(base) == len(other) == 3
    for (f1, l1), (f2, l2) in zip(base, other, strict=True):
        np.testing.assert_array_equal(l1, l2)
        np.testing.assert_array_equal(f1["image"], f2["image"])


def test_the_dtype_is_made_per_image_and_naive_is_the_seed_chain(tmp_path):
    # The float cast/scale runs inside the per-image map, while the image is in cache (on a whole
    # batch it streams the batch through memory once more): nothing maps the batches.
    data = numbered_folder(tmp_path / "imgs")
    optimized = tfpipe.dataset_ops(tfpipe.build_dataset(data, "train", OPT, CONFIG))
    assert optimized == ["RangeDataset", "FlatMapDataset", "BatchDatasetV2", "ParallelMapDatasetV2", "MapDataset",
                         "RebatchDatasetV2", "PrefetchDataset", "OptionsDataset"]
    naive = tfpipe.dataset_ops(tfpipe.build_dataset(data, "train", NAIVE, CONFIG))
    assert naive == ["TensorSliceDataset", "MapDataset", "ShuffleDatasetV3", "MapDataset",
                     "BatchDatasetV2", "RepeatDataset", "OptionsDataset"]  # read, decode: one map each


def test_train_is_endless_and_augments(tmp_path):
    data = numbered_folder(tmp_path / "imgs")
    config = dataclasses.replace(CONFIG, min_crop_area=0.2)
    batches = list(tfpipe.build_dataset(data, "train", OPT, config).take(12).as_numpy_iterator())
    assert len(batches) == 12  # 60 examples from 14 files
    # a flat image stays flat under any crop, so crops show on the patterned gray one only; flips too
    patterned = lambda im: np.ptp(im, axis=(0, 1)).max() > 0.1  # noqa: E731
    eval_gray = [im for f, _ in _eval(data, features=config) for im in f["image"] if patterned(im)]
    train_gray = [im for f, _ in batches for im in f["image"] if patterned(im)]
    assert len(eval_gray) == 1 and len(train_gray) >= 2
    assert len({im.tobytes() for im in train_gray}) == len(train_gray)  # each pass a new crop
    assert all(not np.array_equal(im, eval_gray[0]) for im in train_gray)


def test_a_csv_manifest_of_images_works(tmp_path):
    numbered_folder(tmp_path / "imgs")
    rows = [f"imgs/c{i % 3}/img{i:02d}{'.png' if i % 3 else '.jpg'},class{i % 2}" for i in range(N_IMAGES)]
    (tmp_path / "list.csv").write_text("path,label\n" + "\n".join(rows) + "\n")
    batches = _eval(str(tmp_path / "list.csv"))
    assert sum(len(l) for _, l in batches) == N_IMAGES
    assert sorted(_ids(np.concatenate([f["image"] for f, _ in batches]))) == list(range(N_IMAGES))


def test_serving_signature_decodes_bytes_exactly_like_the_eval_pipeline(tmp_path):
    data = numbered_folder(tmp_path / "imgs")
    write(tmp_path / "imgs" / "c0" / "photo.jpg", encode(pattern(90, 70), "JPEG"))
    write(tmp_path / "imgs" / "c2" / "cmyk.jpg", encode(pattern(50, 80), "JPEG", "CMYK"))
    source = tfpipe.find(data)
    for config in (CONFIG, dataclasses.replace(CONFIG, dtype="uint8")):
        expected = np.concatenate([f["image"] for f, _ in _eval(data, features=config)])
        encoded = [open(p, "rb").read() for p in source.paths]
        with tf.Graph().as_default():
            receiver = serving_input_receiver_fn(config)()
            assert set(receiver.receiver_tensors) == {"image_bytes"}
            with tf.compat.v1.Session() as sess:
                got = sess.run(receiver.features["image"], {receiver.receiver_tensors["image_bytes"]: encoded})
        assert got.dtype == expected.dtype and got.shape == (len(source.paths), 16, 24, 3)
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("store", ["jpeg", "raw"])
def test_stored_stages_turn_offline_values_into_the_online_features(tmp_path, store):
    data = numbered_folder(tmp_path / "imgs")
    write(tmp_path / "imgs" / "c0" / "photo.jpg", encode(pattern(90, 70), "JPEG"))
    source = tfpipe.find(data)
    domain = get_domain("image")
    offline = domain.offline(CONFIG, store)
    values = offline.featurize([offline.load(p) for p in source.paths])
    stored = {"store": store, "config": dataclasses.asdict(CONFIG)}
    online = np.concatenate([f["image"] for f, _ in _eval(data)])
    for mode in ("eval", "train"):
        ds = tf.data.Dataset.from_tensor_slices((values, tf.constant(source.labels, tf.int64)))
        for stage in domain.stored_stages(stored, CONFIG, mode=mode):
            ds = ds.map(stage.fn)
        images = np.stack([f["image"] for f, _ in ds.as_numpy_iterator()])
        assert images.shape == online.shape and images.dtype == np.float32
        if mode == "eval":  # resized once offline (PIL), then cropped and resized: close to the online path
            assert np.abs(images - online).mean() < 0.02
            flat = [i for i, p in enumerate(source.paths) if os.path.basename(p).startswith("img")]
            assert _ids(images[flat]) == _ids(online[flat])
    # Stored at a bounded shorter side, aspect kept: the same shards serve another output size too.
    taller = dataclasses.replace(CONFIG, height=32, dtype="uint8")
    ds = tf.data.Dataset.from_tensor_slices((values, tf.constant(source.labels, tf.int64)))
    for stage in domain.stored_stages(stored, taller, mode="eval"):
        ds = ds.map(stage.fn)
    assert next(ds.as_numpy_iterator())[0]["image"].shape == (32, 24, 3)


def test_shards_written_before_max_side_are_read_and_still_checked():
    """A raw index of the old layout (every image centre-cropped to stored_size, no max_side in its config)."""
    domain = get_domain("image")
    old_config = {k: v for k, v in dataclasses.asdict(CONFIG).items() if k != "max_side"}
    stored = {"store": "raw", "config": old_config}
    images = np.stack([np.full((*CONFIG.stored_size, 3), 10 * i + 5, np.uint8) for i in range(3)])
    ds = tf.data.Dataset.from_tensor_slices(({"image": images}, tf.constant([0, 1, 2], tf.int64)))
    for stage in domain.stored_stages(stored, CONFIG, mode="eval"):
        ds = ds.map(stage.fn)
    assert _ids([f["image"] for f, _ in ds.as_numpy_iterator()]) == [0, 1, 2]
    with pytest.raises(DataError, match=r"written with height=16 \(pipeline asks for 32\).*--height 16"):
        domain.stored_stages(stored, dataclasses.replace(CONFIG, height=32))
    assert domain.stored_stages(stored, dataclasses.replace(CONFIG, flip=False, dtype="uint8"))  # may differ


def test_keras_recipe_yields_the_same_structure_and_similar_eval_images(tmp_path):
    data = numbered_folder(tmp_path / "imgs")
    ours = tfpipe.build_dataset(data, "eval", OPT, CONFIG)
    keras = keras_recipe(data, CONFIG, batch_size=5, mode="eval")
    assert keras.element_spec == ours.element_spec
    k_batches = list(keras.as_numpy_iterator())
    assert sum(len(l) for _, l in k_batches) == N_IMAGES + 1
    k_images = np.concatenate([f["image"] for f, _ in k_batches])
    o_images = np.concatenate([f["image"] for f, _ in _eval(data)])
    np.testing.assert_array_equal(np.concatenate([l for _, l in k_batches]), tfpipe.find(data).labels)
    assert np.abs(k_images - o_images).mean() < 0.03
    train = keras_recipe(data, CONFIG, batch_size=4, seed=1)
    assert len(list(train.take(5))) == 5  # endless
    assert all(f["image"].shape == (4, 16, 24, 3) for f, _ in train.take(2))


def test_synthetic_corpus_is_deterministic_mixed_and_reused(tmp_path):
    first = synthetic.write_corpus(tmp_path / "one", per_class=3, size=(32, 80), progress=False)
    second = synthetic.write_corpus(tmp_path / "two", per_class=3, size=(32, 80), progress=False)
    assert first.kind == "image" and first.class_names == synthetic.CLASS_NAMES
    assert len(first.paths) == 3 * len(synthetic.CLASS_NAMES)
    for a, b in zip(first.paths, second.paths, strict=True):
        assert open(a, "rb").read() == open(b, "rb").read()
    assert {os.path.splitext(p)[1] for p in first.paths} == {".jpg", ".png"}
    from PIL import Image

    sizes = {Image.open(p).size for p in first.paths}
    assert len(sizes) > 10 and all(32 <= s <= 80 for size in sizes for s in size)
    stamp = os.path.getmtime(first.paths[0])
    again = synthetic.write_corpus(tmp_path / "one", per_class=3, size=(32, 80), progress=False)
    assert again.paths == first.paths and os.path.getmtime(first.paths[0]) == stamp  # reused, not rewritten
    smaller = synthetic.write_corpus(tmp_path / "one", per_class=2, size=(32, 80), progress=False, seed=1)
    assert len(smaller.paths) == 2 * len(synthetic.CLASS_NAMES)  # replaced, nothing stale left
    with pytest.raises(ValueError, match="not part of the synthetic image corpus"):
        (tmp_path / "mixed").mkdir()
        (tmp_path / "mixed" / "mine.txt").write_text("x")
        synthetic.write_corpus(tmp_path / "mixed", per_class=1, progress=False)
    with pytest.raises(ValueError, match=r"size=\(8, 80\)"):
        synthetic.write_corpus(tmp_path / "bad", size=(8, 80), progress=False)


@pytest.mark.parametrize("field, value, message", [
    ("height", 4, r"ImageConfig.height=4: must be >= 8"),
    ("dtype", "float16", r"ImageConfig.dtype='float16': allowed values are 'float32', 'uint8'"),
    ("min_crop_area", 0.0, r"ImageConfig.min_crop_area=0.0: must be >= 0.01"),
    ("dct_method", "FLOAT", r"ImageConfig.dct_method='FLOAT': allowed values are 'INTEGER_FAST', 'INTEGER_ACCURATE'"),
    ("max_side", -1, r"ImageConfig.max_side=-1: must be >= 0"),
    ("eval_crop", 1.5, r"ImageConfig.eval_crop=1.5: must be <= 1.0"),
    ("jpeg_quality", 101, r"ImageConfig.jpeg_quality=101: must be <= 100"),
    ("flip", "yes", r"ImageConfig.flip='yes': expected bool"),
])
def test_image_config_names_the_bad_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        ImageConfig(**{field: value})
    assert tfpipe.ImageConfig is ImageConfig
    assert ImageConfig(height=64, width=48).stored_size == (74, 55)
    assert ImageConfig(height=224, width=224).stored_short_side == 256
    assert ImageConfig(max_side=300).stored_short_side == 300
    assert ImageConfig().min_crop_area == 0.08  # the standard (Inception/ResNet) crop distribution
    with pytest.raises(ValueError, match=r"normalize=True with dtype='uint8'"):
        ImageConfig(normalize=True, dtype="uint8")


@pytest.mark.parametrize("store", ["jpeg", "raw"])
def test_image_shards_read_back_through_the_chain_like_the_folder(tmp_path, store):
    data = numbered_folder(tmp_path / "imgs")
    shards = str(tmp_path / f"shards_{store}")
    index = tfpipe.write_shards(data, shards, num_shards=2, num_workers=0, features=CONFIG, store=store,
                                progress=False)
    assert index["domain"]["name"] == "image" and index["num_examples"] == N_IMAGES + 1
    folder = np.concatenate([f["image"] for f, _ in _eval(data)])
    batches = _eval(shards, features=None)  # the config the shards were written with
    images = np.concatenate([f["image"] for f, _ in batches])
    assert images.shape == folder.shape and images.dtype == np.float32
    assert sorted(_ids(images)) == sorted(_ids(folder))  # every image once (shards hold the plan's order)
    train = tfpipe.build_dataset(shards, "train", OPT)  # random crops and flips of the stored images
    features, labels = next(iter(train))
    assert features["image"].shape == (5, 16, 24, 3) and labels.shape == (5,)


def test_read_is_deterministic_and_decode_random_in_train_only():
    domain = get_domain("image")
    train = {s.name: s for s in domain.stages(CONFIG, "train")}
    assert [s.name for s in domain.stages(CONFIG, "train")] == ["read", "decode"]
    assert not train["read"].random and train["decode"].random
    assert not train["decode"].batchable  # images differ in size until resized; the dtype is made there too
    for mode in ("eval", "predict"):
        assert not any(s.random for s in domain.stages(CONFIG, mode))


def test_a_memory_cache_keeps_encoded_bytes_and_crops_differ_every_epoch(tmp_path):
    data = str(tmp_path / "imgs")
    for i in range(4):
        write(tmp_path / "imgs" / f"c{i % 2}" / f"p{i}.jpg", encode(pattern(60, 80, seed=i), "JPEG", quality=95))
    pipe = dataclasses.replace(OPT, batch_size=4, cache="memory", seed=3)
    epochs = [np.sort(np.stack([im.tobytes() for im in f["image"]]))
              for f, _ in tfpipe.build_dataset(data, "train", pipe, CONFIG, epochs=3).as_numpy_iterator()]
    assert len(epochs) == 3
    images = np.concatenate(epochs)
    assert len(set(images.tolist())) == 12  # 12 crops of 4 images over 3 epochs: none repeated


def test_an_image_changed_after_the_build_fails_naming_it(tmp_path):
    data = numbered_folder(tmp_path / "imgs")
    ds = tfpipe.build_dataset(data, "eval", OPT, CONFIG)
    assert sum(len(l) for _, l in ds) == N_IMAGES + 1
    victim = tmp_path / "imgs" / "c1" / "img01.png"
    victim.write_bytes(b"GIF89a" + b"\0" * 100)  # replaced by another format
    # "assertion failed: [PATH] [changed since ...]": the path is the Assert's own data, so no message
    # is built for images that are fine.
    with pytest.raises(tf.errors.InvalidArgumentError, match=rf"\[{victim}\] \[changed since the pipeline was built"):
        list(ds)
    png = encode(pattern(40, 50), "PNG")
    victim.write_bytes(png[:len(png) // 2])  # cut
    with pytest.raises(tf.errors.InvalidArgumentError, match=rf"\[{victim}\] \[changed since .*build the dataset again"):
        list(ds)
    with pytest.raises(DataError, match=rf"{victim}: truncated PNG"):  # and the next build names it up front
        tfpipe.build_dataset(data, "eval", OPT, CONFIG)
