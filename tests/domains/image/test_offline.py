"""Offline images for shard writers: any mode to RGB, resized once, stored as JPEG or raw; bad files named."""

import collections
import io
import os

import numpy as np
import pytest
from PIL import Image

from tests.support import encode, pattern, write
from tests.support import huge_png
from tfpipe.core.source import get_domain
from tfpipe.domains.image import offline
from tfpipe.domains.image.config import ImageConfig
from tfpipe.errors import DataError

CONFIG = ImageConfig(height=28, width=35, eval_crop=0.875)  # stored at 32 x 40
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
    assert pixels.shape == (32, 40, 3) and pixels.dtype == np.uint8
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


def test_load_crops_the_centre_with_the_output_aspect_and_resizes(tmp_path):
    pixels = flat(100, 300)
    pixels[:, :85] = 0  # black outside the centred 32:40 region of a 100x300 image (columns 87..212)
    pixels[:, 215:] = 0
    path = write(tmp_path / "x" / "wide.png", encode(pixels, "PNG"))
    out = offline.load_image(path, CONFIG)
    assert out.shape == (32, 40, 3)
    np.testing.assert_array_equal(out, flat(32, 40))  # the centre only: no black crept in, nothing stretched


def test_large_jpegs_decode_at_reduced_scale_and_match_a_full_decode(tmp_path):
    big = np.kron(pattern(150, 200), np.ones((16, 16, 1), np.uint8))  # 2400 x 3200, smooth
    path = write(tmp_path / "x" / "big.jpg", encode(big, "JPEG", quality=90))
    out = offline.load_image(path, CONFIG)
    full = Image.open(path).convert("RGB")  # no draft: every pixel decoded
    left, top, right, bottom = offline._centre_box(3200, 2400, 32, 40)
    reference = np.asarray(full.resize((40, 32), Image.BILINEAR, box=(left, top, right, bottom)))
    assert np.abs(out.astype(int) - reference).mean() < 2.0


@pytest.mark.parametrize("store", ["jpeg", "raw"])
def test_featurize_matches_the_schema_and_round_trips(tmp_path, store):
    paths = [write(tmp_path / "x" / f"{i}.png", encode(pattern(40 + 10 * i, 60, seed=i), "PNG")) for i in range(3)]
    featurizer = get_domain("image").offline(CONFIG, store)
    loaded = [featurizer.load(p) for p in paths]
    values = featurizer.featurize(loaded)
    (key, (dtype, shape)), = featurizer.schema.fields.items()
    assert set(values) == {key} and len(values[key]) == 3
    if store == "raw":
        assert (key, dtype, shape) == ("image", "uint8", (32, 40, 3))
        np.testing.assert_array_equal(values[key], np.stack(loaded))
    else:
        assert (key, dtype, shape) == ("image_jpeg", "bytes", ())
        for encoded, original in zip(values[key], loaded):
            decoded = np.asarray(Image.open(io.BytesIO(encoded)))
            assert decoded.shape == (32, 40, 3) and np.abs(decoded.astype(int) - original).mean() < 3.0
    assert featurizer.featurize([])[key].shape[0] == 0
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
