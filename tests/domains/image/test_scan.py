"""The up-front image check: every bad kind named at once, with its reason and fix; never blocks or OOMs."""

import os
import re
import time

import numpy as np
import pytest

import tfpipe
from tests.support import encode, huge_png, pattern, write
from tfpipe.domains.image import scan
from tfpipe.domains.image.config import ImageConfig
from tfpipe.errors import DataError

CONFIG = ImageConfig(height=16, width=16)


def bad_folder(root):
    """A class folder with one good image per class and every kind of bad file; returns {name: reason regex}."""
    good_jpeg = encode(pattern(120, 160), "JPEG")
    write(root / "a" / "good.jpg", good_jpeg)
    write(root / "b" / "good.png", encode(pattern(30, 40), "PNG"))
    write(root / "a" / "png_named.jpg", encode(pattern(20, 20), "PNG"))  # fine: decoded by content
    write(root / "b" / "jpeg_named.png", good_jpeg)
    write(root / "a" / "truncated.jpg", good_jpeg[:len(good_jpeg) // 2])  # cut in the pixel data
    write(root / "b" / "cut_header.jpg", good_jpeg[:300])  # cut in the header (Huffman tables)
    png = encode(pattern(30, 40), "PNG")
    write(root / "b" / "truncated.png", png[:len(png) - 20])
    write(root / "a" / "gif.jpg", encode(pattern(20, 20), "GIF"))
    write(root / "b" / "bmp.jpg", encode(pattern(20, 20), "BMP"))
    write(root / "a" / "empty.jpg", b"")
    write(root / "b" / "notes.png", b"this is a text file, not an image\n" * 3)
    huge_png(str(root / "a" / "huge.png"))
    os.mkfifo(root / "b" / "pipe.jpg")  # opening it for reading would block forever
    return {
        "truncated.jpg": r"truncated JPEG \(\d+ bytes, no end-of-image marker\)",
        "truncated.png": r"truncated PNG \(\d+ bytes, no IEND chunk\)",
        "gif.jpg": r"GIF data, though named \.jpg; the online decoder reads JPEG and PNG",
        "bmp.jpg": r"BMP data, though named \.jpg",
        "empty.jpg": r"empty file \(0 bytes\)",
        "notes.png": r"not an image: a text file",
        "cut_header.jpg": r"truncated or damaged header \(.*\); copy or export it again",
        "huge.png": r"400000000 pixels, over ImageConfig.max_pixels=40000000",
        "pipe.jpg": r"not a regular file",
    }


def test_every_bad_image_is_named_in_one_error_with_its_reason_and_fix(tmp_path):
    expected = bad_folder(tmp_path / "imgs")
    started = time.perf_counter()
    with pytest.raises(DataError) as error:
        tfpipe.build_dataset(str(tmp_path / "imgs"), "train", features=CONFIG)  # fails before any training
    assert time.perf_counter() - started < 20  # no decode of the 20000x20000 image, no blocking on the FIFO
    message = str(error.value)
    assert message.startswith(f"{len(expected)} of 13 image files cannot be read by the online pipeline")
    for name, reason in expected.items():
        assert len(re.findall(rf"\S*{name}: {reason}", message)) == 1, (name, message)
    assert "good" not in message and "png_named" not in message and "jpeg_named" not in message
    assert f"tfpipe prepare --input {tmp_path / 'imgs'} --output SHARDS" in message  # GIF/BMP: convertible
    assert "raise --max_pixels" in message  # the oversized one
    assert "remove or replace the files that are empty, truncated or not images" in message


def test_good_files_pass_and_report_their_format_whatever_their_name(tmp_path):
    bad_folder(tmp_path / "imgs")
    names = ("a/good.jpg", "b/good.png", "a/png_named.jpg", "b/jpeg_named.png")
    paths = [str(tmp_path / "imgs" / name) for name in names]
    scanned = scan.scan_images(paths, CONFIG)
    assert [s.format for s in scanned] == ["JPEG", "PNG", "PNG", "JPEG"]
    assert [s.size for s in scanned] == [os.path.getsize(p) for p in paths]
    assert [s.shape for s in scanned] == [(120, 160, 3), (30, 40, 3), (20, 20, 3), (120, 160, 3)]


def test_size_guard_reads_the_header_only_and_follows_max_pixels(tmp_path):
    path = write(tmp_path / "x" / "wide.png", encode(pattern(30, 400), "PNG"))  # 12,000 pixels
    assert scan.check_image(path, 12_000).format == "PNG"
    with pytest.raises(DataError, match=r"wide.png: 400x30 = 12000 pixels, over ImageConfig.max_pixels=11999"):
        scan.check_image(path, 11_999)


def test_max_pixels_above_pils_own_limit_is_what_counts(tmp_path):
    huge = huge_png(str(tmp_path / "x" / "huge.png"))  # 400M pixels: over PIL's own ~179M limit
    assert scan.check_image(huge, 500_000_000).shape == (20000, 20000, 3)  # within the user's guard: usable
    with pytest.raises(DataError) as error:
        scan.check_image(huge, 300_000_000)
    assert "400000000 pixels, over ImageConfig.max_pixels=300000000" in str(error.value)


def test_a_png_damaged_inside_its_body_is_named_by_its_chunk_crc(tmp_path):
    data = bytearray(encode(pattern(40, 50), "PNG"))
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the compressed pixels: "Invalid PNG data" when decoded
    path = write(tmp_path / "c" / "damaged.png", bytes(data))
    good = write(tmp_path / "c" / "good.png", encode(pattern(40, 50), "PNG"))
    with pytest.raises(DataError) as error:
        scan.scan_images([good, path], CONFIG)
    assert re.search(rf"{path}: damaged PNG: the 'IDAT' chunk at byte \d+ fails its CRC check", str(error.value))
    assert "good.png" not in str(error.value) and "remove or replace" in str(error.value)


def test_a_jpeg_with_bytes_after_its_end_marker_is_complete(tmp_path):
    data = encode(pattern(30, 40), "JPEG")
    path = write(tmp_path / "x" / "trailer.jpg", data + b"\x00" * 500)  # some cameras append data
    assert scan.check_image(path, 10 ** 6).format == "JPEG"


def test_more_bad_files_than_listed_are_counted(tmp_path):
    paths = [write(tmp_path / "c" / f"e{i}.jpg", b"") for i in range(14)]
    with pytest.raises(DataError, match=r"(?s)14 of 14 image files.*e9.jpg.*\.\.\. and 4 more"):
        scan.scan_images(paths, CONFIG)


def test_scan_is_header_only_fast(tmp_path):
    data = encode(np.tile(pattern(300, 400), (4, 4, 1)), "JPEG")  # 1600x1200: a 5 ms decode each
    paths = [write(tmp_path / "f" / f"{i}.jpg", data) for i in range(200)]
    started = time.perf_counter()
    scan.scan_images(paths, CONFIG)
    per_file = (time.perf_counter() - started) / len(paths)
    assert per_file < 2e-3, per_file  # measured ~0.1 ms; a decode would be tens of ms on 2 busy cores
