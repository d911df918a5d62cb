"""The tensorflow/models ResNet recipe (the bench's tf-models variant): the chain's structure and output,
its eval images close to tfpipe's, random train crops, JPEG folders only."""

import numpy as np
import pytest

import tfpipe
from tests.support import encode, pattern, write
from tfpipe.config import PipelineConfig
from tfpipe.domains.image.config import ImageConfig
from tfpipe.domains.image.recipes import tf_models_recipe

SQUARE = ImageConfig(height=24, width=24)  # square: the recipe's resize-then-center-crop = tfpipe's eval crop


def jpeg_folder(root, n=6):
    for i in range(n):
        write(root / f"c{i % 2}" / f"p{i}.jpg", encode(pattern(60 + 10 * i, 80, seed=i), "JPEG", quality=95))
    return str(root)


def test_eval_gives_tfpipes_output_and_order_with_close_pixels(tmp_path):
    data = jpeg_folder(tmp_path / "imgs")
    ours = tfpipe.build_dataset(data, "eval", PipelineConfig.optimized(batch_size=4), SQUARE)
    theirs = tf_models_recipe(data, SQUARE, batch_size=4, mode="eval")
    assert theirs.element_spec == ours.element_spec
    o_batches, t_batches = list(ours.as_numpy_iterator()), list(theirs.as_numpy_iterator())
    assert [len(l) for _, l in t_batches] == [4, 2]  # one pass, the last batch kept
    np.testing.assert_array_equal(np.concatenate([l for _, l in t_batches]), tfpipe.find(data).labels)
    o_images = np.concatenate([f["image"] for f, _ in o_batches])
    t_images = np.concatenate([f["image"] for f, _ in t_batches])
    assert np.abs(o_images - t_images).mean() < 0.02  # same region; resize and IDCT differ a little


@pytest.mark.parametrize("dtype, normalize", [("float32", False), ("float32", True), ("uint8", False)])
def test_train_is_random_endless_and_follows_the_configs_output(tmp_path, dtype, normalize):
    data = jpeg_folder(tmp_path / "imgs")
    config = ImageConfig(height=24, width=24, dtype=dtype, normalize=normalize)
    batches = list(tf_models_recipe(data, config, batch_size=4, seed=0).take(6).as_numpy_iterator())
    assert len(batches) == 6 and all(len(l) == 4 for _, l in batches)  # 24 examples from 6 files: endless
    images = np.concatenate([f["image"] for f, _ in batches])
    assert images.dtype == np.dtype(dtype) and images.shape[1:] == (24, 24, 3)
    assert len({im.tobytes() for im in images}) == len(images)  # random crops and flips
    if normalize:
        assert images.min() < -0.5  # centred on the ImageNet mean, not in [0, 1]
    elif dtype == "float32":
        assert 0.0 <= images.min() and images.max() <= 1.0
    assert int(tf_models_recipe(data, config, batch_size=2, seed=0, epochs=2).cardinality()) == 6


def test_only_jpeg_folders_as_the_recipe_reads(tmp_path):
    data = jpeg_folder(tmp_path / "imgs")
    write(tmp_path / "imgs" / "c0" / "drawing.png", encode(pattern(20, 20), "PNG"))
    with pytest.raises(ValueError, match=r"1 files are not JPEG, e\.g\. .*drawing\.png.*decodes JPEG only"):
        tf_models_recipe(data, SQUARE)
    with pytest.raises(ValueError, match=r"missing: not a folder"):
        tf_models_recipe(str(tmp_path / "missing"), SQUARE)
