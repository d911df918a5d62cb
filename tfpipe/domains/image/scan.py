"""The online image check: every file's header is read once, up front, before training starts.

The online pipeline decodes JPEG and PNG with TensorFlow inside tf.data maps, where a bad
file would stop training hours in with a traceback that does not name it. This scan
opens each file's header with PIL (format, size, mode: no pixel is decoded), checks that
a JPEG ends in its end-of-image marker and a PNG in its IEND chunk (the last KiBs only),
and names every file the pipeline cannot read, with the fix that applies to it. It costs
about 60-80 µs a file (header parse plus one small tail read), ~7 s per 100k files.
"""

from __future__ import annotations

import os
import re
import stat
import warnings
from typing import Sequence

from PIL import Image, UnidentifiedImageError

from tfpipe.domains.image.config import ImageConfig
from tfpipe.errors import DataError, listed

_MAX_LISTED = 10  # bad files named in one error message
ONLINE_FORMATS = ("JPEG", "PNG")  # what the TF decoders in ops read by content
_JPEG_EOI = b"\xff\xd9"
_PNG_IEND = b"IEND"
# How far back from a file's end its end marker may sit: encoders and cameras may append a little.
_TAIL_BYTES = 16 << 10  # 16 KiB
_BOMB_PIXELS = re.compile(r"\((\d+) pixels\)")


class Unusable(DataError):
    """One file's problem; `convertible`: `tfpipe prepare` (PIL) reads and converts it."""

    def __init__(self, path: str, reason: str, *, convertible: bool = False, too_large: bool = False):
        super().__init__(f"{path}: {reason}")
        self.convertible, self.too_large = convertible, too_large


def scan_images(paths: Sequence[str], config: ImageConfig) -> tuple[str, ...]:
    """Checks that each file is a complete JPEG or PNG within config.max_pixels.

    Args:
      paths: the image files.
      config: its max_pixels is the size guard.

    Returns:
      Each file's format ("JPEG" or "PNG"), in order.

    Raises:
      DataError: naming every unusable file (the first few, and how many more), what was
        found, and the fix for that kind of problem.
    """
    formats, bad = [], []
    for path in paths:
        try:
            formats.append(check_image(path, config.max_pixels))
        except Unusable as e:
            bad.append(e)
            formats.append("")
    if bad:
        raise DataError(f"{len(bad)} of {len(paths)} image files cannot be read by the online pipeline, "
                        f"which decodes complete JPEG and PNG files of at most {config.max_pixels} pixels:"
                        f"{listed(bad, _MAX_LISTED)}\nFix: {_fix(bad, paths)}")
    return tuple(formats)


def check_image(path: str, max_pixels: int, formats: Sequence[str] = ONLINE_FORMATS) -> str:
    """The format of an image file the online pipeline can read, from its header and its last bytes.

    Raises:
      Unusable: what is wrong with the file.
    """
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):  # a FIFO or device would block the scan forever
            raise Unusable(path, "not a regular file (a pipe, device or socket)")
        if info.st_size == 0:
            raise Unusable(path, "empty file (0 bytes)")
        with open(path, "rb") as f:
            image = open_header(f, path, max_pixels)
            header_end = f.tell()  # JPEG: just past the first start-of-scan
            if image.format not in formats:
                raise Unusable(path, f"{image.format} data, though named {os.path.splitext(path)[1]}; the "
                                     f"online decoder reads {' and '.join(formats)}", convertible=True)
            f.seek(max(header_end, info.st_size - _TAIL_BYTES))
            tail = f.read()
    except OSError as e:
        raise Unusable(path, f"unreadable ({e.strerror or e})") from e
    marker = _JPEG_EOI if image.format == "JPEG" else _PNG_IEND
    if marker not in tail:
        what = "end-of-image marker" if image.format == "JPEG" else "IEND chunk"
        raise Unusable(path, f"truncated {image.format} ({info.st_size} bytes, no {what}); "
                             f"copy or export it again")
    return image.format


def open_header(f, path: str, max_pixels: int) -> Image.Image:
    """PIL's lazily opened image (header only) of an open file, refused above max_pixels.

    Raises:
      Unusable: not an image PIL knows, or too many pixels.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # our guard speaks instead
            image = Image.open(f)
    except Image.DecompressionBombError as e:  # over PIL's own limit (~179M pixels): no size given
        pixels = _BOMB_PIXELS.search(str(e))
        raise _too_large(path, f"{pixels.group(1)} pixels" if pixels else "too many pixels", max_pixels) from None
    except UnidentifiedImageError:
        f.seek(0)
        head = f.read(64)
        kind = "a text file" if _looks_like_text(head) else f"unknown format (starts with {head[:8]!r})"
        raise Unusable(path, f"not an image: {kind}") from None
    except (OSError, SyntaxError) as e:  # a format PIL knows, cut or damaged inside its header
        raise Unusable(path, f"truncated or damaged header ({e}); copy or export it again") from None
    width, height = image.size
    if width * height > max_pixels:
        raise _too_large(path, f"{width}x{height} = {width * height} pixels", max_pixels)
    return image


def _too_large(path: str, size: str, max_pixels: int) -> Unusable:
    return Unusable(path, f"{size}, over ImageConfig.max_pixels={max_pixels} (decoded it would take 3 bytes "
                          f"a pixel)", too_large=True)


def _looks_like_text(head: bytes) -> bool:
    """UTF-8 printable text (a multi-byte character cut at the end of `head` is allowed)."""
    text = head.decode("utf-8", "replace")
    return text.count("\ufffd") <= 3 and all(c.isprintable() or c.isspace() for c in text.replace("\ufffd", ""))


def _fix(bad: Sequence[Unusable], paths: Sequence[str]) -> str:
    """The advice that applies to these problems, with the user's real folder in it."""
    folder = os.path.commonpath([os.path.dirname(p) for p in paths]) if paths else "DATA"
    advice = []
    if any(e.convertible for e in bad):
        advice.append(f"re-save GIF/BMP/TIFF/WebP files as JPEG or PNG, or convert the folder with "
                      f"`tfpipe prepare --input {folder} --output SHARDS` (PIL reads them) and train on SHARDS")
    if any(e.too_large for e in bad):
        advice.append("downscale the oversized images, or raise --max_pixels (ImageConfig.max_pixels) if "
                      "the machine has the memory for them")
    if any(not (e.convertible or e.too_large) for e in bad):
        advice.append("remove or replace the files that are empty, truncated or not images "
                      "(prepare --on_error=skip lists them instead)")
    return "; ".join(advice)
