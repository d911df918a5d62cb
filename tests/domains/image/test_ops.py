"""Image ops, eagerly and inside Dataset.map: decode (every mode), fused decode-and-crop, windows,
resize, dtype, normalize."""

import dataclasses
import io

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from PIL import Image

from tests.support import encode, pattern
from tfpipe.domains.image import ops
from tfpipe.domains.image.config import ImageConfig


def _eager_and_mapped(fn, *inputs):
    """fn eagerly and inside Dataset.map over the same single element."""
    eager = fn(*map(tf.constant, inputs)).numpy()
    mapped = next(iter(tf.data.Dataset.from_tensors(tuple(inputs)).map(fn))).numpy()
    return eager, mapped


PIXELS = pattern(40, 50)
MODES = {  # PIL mode -> (format, the RGB PIL itself gives for it)
    "RGB_jpeg": ("JPEG", "RGB"), "L_jpeg": ("JPEG", "L"), "CMYK_jpeg": ("JPEG", "CMYK"),
    "RGB_png": ("PNG", "RGB"), "L_png": ("PNG", "L"), "LA_png": ("PNG", "LA"), "RGBA_png": ("PNG", "RGBA"),
    "P_png": ("PNG", "P"), "1_png": ("PNG", "1"),
}


@pytest.mark.parametrize("name", sorted(MODES))
def test_decode_rgb_gives_three_channels_like_pil_for_every_mode(name):
    fmt, mode = MODES[name]
    data = encode(PIXELS, fmt, mode, **({"quality": 95} if fmt == "JPEG" else {}))
    reference = np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(int)
    eager, mapped = _eager_and_mapped(ops.decode_rgb, data)
    assert eager.shape == (40, 50, 3) and eager.dtype == np.uint8
    np.testing.assert_array_equal(eager, mapped)
    # PNG is lossless: exact. JPEG: TF's default IDCT (fast integer) and PIL's (slow integer)
    # round differently; CMYK more (the two convert CMYK->RGB by different formulas).
    tolerance = {"PNG": 0, "JPEG": 6}[fmt] if mode != "CMYK" else 12
    difference = np.abs(eager.astype(int) - reference)
    assert difference.max() <= tolerance and difference.mean() <= (0.0 if fmt == "PNG" else 2.0)


def test_decode_rgb_scales_16_bit_png_to_the_top_byte():
    values = (np.arange(40 * 50, dtype=np.uint32).reshape(40, 50) * 31 % 65536).astype(np.uint16)
    data = encode(Image.fromarray(values), "PNG")
    assert Image.open(io.BytesIO(data)).mode.startswith("I;16")
    eager, mapped = _eager_and_mapped(ops.decode_rgb, data)
    np.testing.assert_array_equal(eager, np.repeat((values >> 8).astype(np.uint8)[..., None], 3, -1))
    np.testing.assert_array_equal(mapped, eager)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_decode_and_crop_equals_decode_then_crop(fmt):
    data = encode(pattern(120, 90), fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    window = tf.constant([13, 7, 61, 45])
    full = ops.decode_rgb(tf.constant(data)).numpy()

    def fused(contents):  # min_size = the window: no scaled decode
        return ops.decode_and_crop(contents, lambda shape: window, min_size=(61, 45))

    eager, mapped = _eager_and_mapped(fused, data)
    np.testing.assert_array_equal(mapped, eager)
    difference = np.abs(eager.astype(int) - full[13:13 + 61, 7:7 + 45])
    if fmt == "PNG":
        assert difference.max() == 0
    else:  # libjpeg upsamples chroma at a crop edge that is not on a block boundary a little differently
        assert difference.max() <= 3 and difference.mean() < 0.1


def test_jpeg_window_is_decoded_at_reduced_scale_when_it_stays_above_the_output_size():
    data = encode(pattern(480, 640), "JPEG", quality=90)
    window = tf.constant([40, 80, 400, 480])
    full = ops.decode_rgb(tf.constant(data)).numpy()[40:440, 80:560]
    for min_size, ratio in (((400, 480), 1), ((200, 240), 2), ((100, 100), 4), ((50, 60), 8), ((10, 10), 8)):
        out = ops.decode_and_crop(tf.constant(data), lambda shape: window, min_size).numpy()
        assert out.shape == (400 // ratio, 480 // ratio, 3), (min_size, out.shape)
        # The scaled decode is a proper downscale of the same pixels: compare at the output size.
        ours = ops.resize(out, 50, 60).numpy().astype(int)
        reference = ops.resize(full, 50, 60).numpy().astype(int)
        assert np.abs(ours - reference).mean() < 3.0, ratio


def test_center_window_keeps_the_output_aspect_and_the_fraction():
    window = ops.center_window(tf.constant([100, 200, 3]), 64, 64, 0.5).numpy()
    np.testing.assert_array_equal(window, [25, 75, 50, 50])  # half of the largest square (100)
    window = ops.center_window(tf.constant([300, 200, 3]), 32, 64, 1.0).numpy()
    np.testing.assert_array_equal(window, [100, 0, 100, 200])  # 1:2, as wide as the image
    tiny = ops.center_window(tf.constant([1, 1, 3]), 64, 64, 0.875).numpy()
    np.testing.assert_array_equal(tiny, [0, 0, 1, 1])


def test_random_window_stays_inside_and_covers_the_minimum_area():
    shape = tf.constant([120, 200, 3])
    windows = np.stack([ops.random_window(shape, 0.35).numpy() for _ in range(100)])
    mapped = np.stack(list(tf.data.Dataset.from_tensors(shape).repeat(100)
                           .map(lambda s: ops.random_window(s, 0.35)).as_numpy_iterator()))
    for w in (windows, mapped):
        y, x, rows, columns = w.T
        assert (y >= 0).all() and (x >= 0).all() and (y + rows <= 120).all() and (x + columns <= 200).all()
        area = rows * columns / (120 * 200)
        assert (area >= 0.35 - 0.02).all() and (area <= 1.0).all()
        assert len({tuple(v) for v in w}) > 50  # random, not one fixed crop


def test_random_flip_flips_about_half_the_time():
    image = tf.constant(pattern(8, 9))
    flipped = [bool((ops.random_flip(image).numpy() != image.numpy()).any()) for _ in range(200)]
    assert 60 < sum(flipped) < 140
    assert all((f.numpy() == image.numpy()).all() or (f.numpy() == image.numpy()[:, ::-1]).all()
               for f in (ops.random_flip(image) for _ in range(10)))


def test_resize_rounds_to_uint8_at_the_output_size():
    eager, mapped = _eager_and_mapped(lambda x: ops.resize(x, 16, 24), pattern(40, 50))
    assert eager.shape == (16, 24, 3) and eager.dtype == np.uint8
    np.testing.assert_array_equal(eager, mapped)
    flat = np.full((30, 30, 3), 77, np.uint8)
    np.testing.assert_array_equal(ops.resize(flat, 7, 9).numpy(), 77)


def test_to_dtype_and_normalize_on_single_images_and_batches():
    batch = np.stack([pattern(4, 5, seed=s) for s in range(3)])
    floats = ops.to_dtype(tf.constant(batch), "float32").numpy()
    np.testing.assert_allclose(floats, batch / 255.0, rtol=1e-6)
    assert ops.to_dtype(tf.constant(batch), "uint8").dtype == tf.uint8
    np.testing.assert_allclose(ops.to_dtype(tf.constant(batch[0]), "float32").numpy(), floats[0])
    # normalize gives the same for the uint8 and the [0, 1] float form, one image or a batch
    from_bytes = ops.normalize(tf.constant(batch)).numpy()
    np.testing.assert_allclose(ops.normalize(tf.constant(floats)).numpy(), from_bytes, atol=1e-5)
    np.testing.assert_allclose(ops.normalize(tf.constant(batch[1])).numpy(), from_bytes[1], atol=1e-6)
    mean_colour = np.round(np.array(ops.IMAGENET_MEAN) * 255).astype(np.uint8)
    centred = ops.normalize(tf.constant(np.tile(mean_colour, (2, 2, 1)))).numpy()
    assert np.abs(centred).max() < 0.01  # the ImageNet mean maps to ~0
    one_std = ops.normalize(tf.constant([[[0.485 + 0.229, 0.456, 0.406]]])).numpy()
    np.testing.assert_allclose(one_std, [[[1.0, 0.0, 0.0]]], atol=1e-6)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_preprocess_eval_is_deterministic_and_the_same_in_map_and_tf_function(fmt):
    config = ImageConfig(height=24, width=32, dtype="uint8")
    data = encode(pattern(90, 70), fmt)
    eager, mapped = _eager_and_mapped(lambda c: ops.preprocess(c, config, train=False), data)
    traced = tf.function(lambda c: ops.preprocess(c, config, train=False))(tf.constant(data)).numpy()
    assert eager.shape == (24, 32, 3) and eager.dtype == np.uint8
    np.testing.assert_array_equal(eager, mapped)
    np.testing.assert_array_equal(eager, traced)
    # = crop the center window of the decoded image, then resize (the fused decode changes nothing here)
    if fmt == "JPEG":  # the config's decode: fast integer IDCT, chroma by replication
        full = tf.io.decode_jpeg(data, channels=3, dct_method=config.dct_method,
                                 fancy_upscaling=config.fancy_upscaling)
    else:
        full = ops.decode_rgb(tf.constant(data))
    reference = ops.resize(ops.crop(full, ops.eval_window(config)(tf.shape(full))), 24, 32).numpy()
    np.testing.assert_array_equal(eager, reference)
    # float32 is the same resize, scaled to [0, 1] on the image itself (not rounded to bytes first)
    floats = ops.preprocess(tf.constant(data), dataclasses.replace(config, dtype="float32"), train=False).numpy()
    assert floats.dtype == np.float32 and np.abs(floats * 255.0 - reference).max() <= 0.5 + 1e-3


def test_preprocess_train_is_random_but_well_formed():
    config = ImageConfig(height=24, width=32, dtype="uint8")
    data = tf.constant(encode(pattern(90, 70), "JPEG"))
    outs = [ops.preprocess(data, config, train=True).numpy() for _ in range(8)]
    assert all(o.shape == (24, 32, 3) and o.dtype == np.uint8 for o in outs)
    assert len({o.tobytes() for o in outs}) > 4
    mapped = list(tf.data.Dataset.from_tensors(data).repeat(4)
                  .map(lambda c: ops.preprocess(c, config, train=True)).as_numpy_iterator())
    assert all(o.shape == (24, 32, 3) for o in mapped)
    decoded = ops.decode_rgb(data)
    assert ops.preprocess_decoded(decoded, config, train=True).shape == (24, 32, 3)


def _psnr(a, b):
    mse = np.mean((a.astype(float) - b.astype(float)) ** 2)
    return 10 * np.log10(255.0 ** 2 / mse)


@pytest.mark.parametrize("dct_method, fancy_upscaling", [("INTEGER_FAST", False), ("INTEGER_FAST", True),
                                                         ("INTEGER_ACCURATE", False), ("", True)])
def test_each_jpeg_decode_option_works_eagerly_and_in_map_and_stays_close_to_the_exact_decode(dct_method,
                                                                                               fancy_upscaling):
    data = encode(np.kron(pattern(60, 80), np.ones((4, 4, 1), np.uint8)), "JPEG", quality=90)  # 240 x 320
    exact = tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE").numpy()
    window = tf.constant([16, 32, 160, 224])

    def decode(contents):  # min_size = the window: full scale, so it compares with the exact decode
        return ops.decode_and_crop(contents, lambda shape: window, (160, 224), dct_method=dct_method,
                                   fancy_upscaling=fancy_upscaling)

    eager, mapped = _eager_and_mapped(decode, data)
    np.testing.assert_array_equal(eager, mapped)
    assert eager.shape == (160, 224, 3)
    assert _psnr(eager, exact[16:176, 32:256]) > 38  # the fast decode costs little (BUILD_NOTES: Images)


def test_scaled_decode_can_be_turned_off_and_a_known_shape_skips_the_header():
    data = encode(pattern(480, 640), "JPEG", quality=90)
    window = tf.constant([40, 80, 400, 480])
    scaled, _ = _eager_and_mapped(lambda c: ops.decode_and_crop(c, lambda s: window, (100, 100)), data)
    full, mapped = _eager_and_mapped(lambda c: ops.decode_and_crop(c, lambda s: window, (100, 100), scaled=False),
                                     data)
    assert scaled.shape == (100, 120, 3) and full.shape == (400, 480, 3)
    np.testing.assert_array_equal(full, mapped)
    seen = []

    def window_fn(shape):
        seen.append(shape)
        return window

    given, _ = _eager_and_mapped(lambda c: ops.decode_and_crop(c, window_fn, (100, 100), shape=tf.constant(
        [480, 640, 3])), data)
    np.testing.assert_array_equal(given, scaled)
    assert all(s.shape == (3,) for s in seen)
    np.testing.assert_array_equal(ops.image_shape(tf.constant(data)), [480, 640, 3])
    np.testing.assert_array_equal(ops.image_shape(tf.constant(encode(pattern(30, 70), "PNG"))), [30, 70, 3])


def test_to_dtype_on_batches_matches_the_per_example_formula_eagerly_and_in_map():
    batch = np.stack([pattern(6, 7, seed=s) for s in range(4)])
    for normalized in (False, True):
        reference = ops.normalize(tf.constant(batch)).numpy() if normalized else batch / 255.0
        eager = ops.to_dtype(tf.constant(batch), "float32", normalized).numpy()
        mapped = np.concatenate(list(tf.data.Dataset.from_tensor_slices(batch).batch(3).map(
            lambda b: ops.to_dtype(b, "float32", normalized)).as_numpy_iterator()))
        for got in (eager, mapped, ops.to_dtype(tf.constant(batch[0]), "float32", normalized).numpy()[None]):
            np.testing.assert_allclose(got, reference[:len(got)], atol=1e-5)
            assert got.dtype == np.float32


def test_only_the_decode_scales_the_images_allow_get_a_branch():
    config = tfpipe.ImageConfig(height=16, width=16)
    assert ops.usable_ratios([(32, 32, 3)] * 5, config, train=True) == (1,)  # tiny: no branch at all
    assert ops.usable_ratios([(32, 32, 3), (400, 300, 3)], config, train=True) == (8, 4, 2, 1)
    assert ops.usable_ratios([(400, 300, 3)], dataclasses.replace(config, scaled_decode=False), train=True) == (1,)
