"""Offline images for shard writers: any mode to RGB, scaled down once to a bounded shorter side (aspect
kept), stored as JPEG or raw pixels; bad files named."""

import collections
import dataclasses
import io
import os

import numpy as np
import pytest
from PIL import Image

from tests.support import encode, pattern, write
from tests.support import huge_png
from tfpipe.core.registry import get_domain
from tfpipe.domains.image import offline
from tfpipe.domains.image.config import ImageConfig
from tfpipe.errors import DataError

CONFIG = ImageConfig(height=28, width=35, eval_crop=0.875)  # stored with a shorter side of 40 (= ceil(35 / 0.875))
COLOUR = np.array([200, 120, 40], np.uint8)


def flat(height, width, colour=COLOUR):
    return np.zeros((height, width, 3), np.uint8) + colour


@pytest.mark.parametrize("fmt, mode, expected", [
    ("PNG", "RGB", COLOUR),
    ("JPEG", "RGB", COLOUR),
    ("PNG", "RGBA", COLOUR),  # alpha dropped, as the online decoder does
    ("PNG", "LA", None),
    ("PNG", "L", None),  # gray repeated to three equal channels
    ("JPEG", "L", None),
    ("PNG", "P", "palette"),  # PIL dithers to its palette: compared with PIL's own RGB of the file
    ("JPEG", "CMYK", COLOUR),
    ("GIF", "P", "palette"),  # named .jpg: online refuses it, offline converts it
    ("BMP", "RGB", COLOUR),
])
def test_load_converts_every_mode_to_rgb_at_the_stored_size(tmp_path, fmt, mode, expected):
    options = {"quality": 95} if fmt == "JPEG" else {}
    path = write(tmp_path / "x" / "img.jpg", encode(flat(50, 90), fmt, mode, **options))
    notes = collections.Counter()
    pixels = offline.load_image(path, CONFIG, notes)
    assert pixels.shape == (40, 72, 3) and pixels.dtype == np.uint8  # 50 x 90 scaled to a shorter side of 40
    if expected is None:  # gray: the colour's luma in every channel
        luma = round(0.299 * 200 + 0.587 * 120 + 0.114 * 40)
        assert np.abs(pixels.astype(int) - luma).max() <= 2
    elif isinstance(expected, str):
        reference = np.asarray(Image.open(path).convert("RGB")).reshape(-1, 3).mean(axis=0)
        assert np.abs(pixels.reshape(-1, 3).mean(axis=0) - reference).max() < 3
    else:
        tolerance = 3 if fmt == "JPEG" else 0
        assert np.abs(pixels.astype(int) - expected).max() <= tolerance, pixels[0, 0]
    assert notes["converted_format"] == (fmt in ("GIF", "BMP"))
    assert notes["converted_mode"] == (mode != "RGB")


def test_load_scales_16_bit_gray_like_the_online_decoder(tmp_path):
    values = np.full((40, 50), 51400, np.uint16)  # top byte 200
    path = write(tmp_path / "x" / "deep.png", encode(Image.fromarray(values), "PNG"))
    np.testing.assert_array_equal(offline.load_image(path, CONFIG), 200)


def test_load_keeps_the_whole_image_and_its_aspect_scaling_the_shorter_side_down_only(tmp_path):
    pixels = flat(100, 300)
    pixels[:, :30] = 0  # a black band at the left edge: kept, since nothing is cropped offline
    path = write(tmp_path / "x" / "wide.png", encode(pixels, "PNG"))
    notes = collections.Counter()
    out = offline.load_image(path, CONFIG, notes)
    assert out.shape == (40, 120, 3) and notes["downscaled"] == 1
    np.testing.assert_array_equal(out[:, :11], 0)
    np.testing.assert_array_equal(out[:, 13:], flat(40, 107))
    small = write(tmp_path / "x" / "small.png", encode(flat(30, 50), "PNG"))
    np.testing.assert_array_equal(offline.load_image(small, CONFIG, notes), flat(30, 50))  # never enlarged
    assert notes["downscaled"] == 1
    wide = dataclasses.replace(CONFIG, max_side=64)  # max_side: the shorter side asked for
    assert offline.load_image(path, wide).shape == (64, 192, 3)
    assert offline.stored_size(300, 100, 40) == (120, 40) and offline.stored_size(30, 50, 40) == (30, 50)


def test_large_jpegs_decode_at_reduced_scale_and_match_a_full_decode(tmp_path):
    big = np.kron(pattern(150, 200), np.ones((16, 16, 1), np.uint8))  # 2400 x 3200, smooth
    path = write(tmp_path / "x" / "big.jpg", encode(big, "JPEG", quality=90))
    out = offline.load_image(path, CONFIG)
    assert out.shape == (40, 53, 3)
    full = Image.open(path).convert("RGB")  # no draft: every pixel decoded
    reference = np.asarray(full.resize((53, 40), Image.BILINEAR))
    assert np.abs(out.astype(int) - reference).mean() < 2.0


@pytest.mark.parametrize("store", ["jpeg", "raw"])
def test_featurize_matches_the_schema_and_round_trips(tmp_path, store):
    paths = [write(tmp_path / "x" / f"{i}.png", encode(pattern(40 + 10 * i, 60, seed=i), "PNG")) for i in range(3)]
    featurizer = get_domain("image").offline(CONFIG, store)
    loaded = [featurizer.load(p) for p in paths]
    assert [p.shape for p in loaded] == [(40, 60, 3), (40, 48, 3), (40, 40, 3)]  # sizes differ: stored as bytes
    values = featurizer.featurize(loaded)
    if store == "raw":
        assert featurizer.schema.fields == {"image_raw": ("bytes", ()), "image_shape": ("int32", (3,))}
        assert set(values) == {"image_raw", "image_shape"}
        for raw, shape, original in zip(values["image_raw"], values["image_shape"], loaded, strict=True):
            np.testing.assert_array_equal(np.frombuffer(raw, np.uint8).reshape(shape), original)
    else:
        assert featurizer.schema.fields == {"image_jpeg": ("bytes", ())} and set(values) == {"image_jpeg"}
        for encoded, original in zip(values["image_jpeg"], loaded, strict=True):
            decoded = np.asarray(Image.open(io.BytesIO(encoded)))
            assert decoded.shape == original.shape and np.abs(decoded.astype(int) - original).mean() < 4.0
    assert all(len(v) == 0 for v in featurizer.featurize([]).values())
    with pytest.raises(ValueError, match=r"store='png': allowed values are 'jpeg', 'raw'"):
        get_domain("image").offline(CONFIG, "png")
    assert get_domain("image").stores() == ("jpeg", "raw")


def test_bad_files_raise_data_error_naming_them(tmp_path):
    good = encode(pattern(120, 160), "JPEG")
    cases = {
        "empty.jpg": (b"", r"empty file \(0 bytes\)"),
        "text.png": (b"hello, not an image\n", r"not an image: a text file"),
        "truncated.jpg": (good[:len(good) // 2], r"damaged or truncated image .*copy or export it again"),
        "cut_header.jpg": (good[:300], r"truncated or damaged header"),
    }
    for name, (data, reason) in cases.items():
        path = write(tmp_path / "x" / name, data)
        with pytest.raises(DataError, match=rf"{path}: {reason}"):
            offline.load_image(path, CONFIG)
    huge = huge_png(str(tmp_path / "x" / "huge.png"))
    with pytest.raises(DataError, match=rf"{huge}: 400000000 pixels, over ImageConfig.max_pixels"):
        offline.load_image(huge, CONFIG)
    os.mkfifo(tmp_path / "x" / "pipe.jpg")
    with pytest.raises(DataError, match=r"pipe.jpg: not a regular file"):
        offline.load_image(str(tmp_path / "x" / "pipe.jpg"), CONFIG)
