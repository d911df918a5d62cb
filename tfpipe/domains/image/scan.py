"""The online image check: every file's header is read once, up front, before training starts.

The online pipeline decodes JPEG and PNG with TensorFlow inside tf.data maps, where a bad
file would stop training hours in with a traceback that does not name it. This scan
opens each file's header with PIL (format, size, mode: no pixel is decoded), checks that
a JPEG ends in its end-of-image marker, and that a PNG's chunks are all there with their
CRCs right (a PNG is read whole for that, but not decoded: a damaged body would otherwise
fail as "Invalid PNG data" naming no file), and names every file the pipeline cannot read,
with the fix that applies to it. It costs about 60-80 µs a JPEG (header parse plus one
small tail read), ~7 s per 100k files; a PNG about its read and a CRC.
"""

from __future__ import annotations

import os
import re
import struct
import threading
import warnings
import zlib
from typing import NamedTuple, Sequence

from PIL import Image, UnidentifiedImageError

from tfpipe.core import filesystem as fs
from tfpipe.core.checks import FileProblem, check_files, open_head
from tfpipe.domains.image.config import CHANNELS, ImageConfig

ONLINE_FORMATS = ("JPEG", "PNG")  # what the TF decoders in ops read by content
_JPEG_EOI = b"\xff\xd9"
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# How far back from a file's end its end marker may sit: encoders and cameras may append a little.
_TAIL_BYTES = 16 << 10  # 16 KiB
_PIL_LIMIT_LOCK = threading.Lock()
_BOMB_PIXELS = re.compile(r"\((\d+) pixels\)")


class Scanned(NamedTuple):
    """What the scan found of a usable file: format ("JPEG" or "PNG"), bytes, [rows, columns, 3]."""

    format: str
    size: int
    shape: tuple[int, int, int]


class Unusable(FileProblem):
    """One file's problem; `convertible`: `tfpipe prepare` (PIL) reads and converts it."""

    def __init__(self, path: str, reason: str, *, convertible: bool = False, too_large: bool = False):
        super().__init__(path, reason)
        self.convertible, self.too_large = convertible, too_large


def scan_images(paths: Sequence[str], config: ImageConfig) -> tuple[Scanned, ...]:
    """Checks that each file is a complete JPEG or PNG within config.max_pixels.

    Args:
      paths: the image files.
      config: its max_pixels is the size guard.

    Returns:
      Each file's format and size, in order.

    Raises:
      DataError: naming every unusable file (the first few, and how many more), what was
        found, and the fix for that kind of problem.
    """
    return tuple(check_files(paths, lambda p: check_image(p, config.max_pixels),
                             what=f"image files cannot be read by the online pipeline, which decodes complete "
                                  f"JPEG and PNG files of at most {config.max_pixels} pixels",
                             fix=lambda bad: _fix(bad, paths)))


def check_image(path: str, max_pixels: int, formats: Sequence[str] = ONLINE_FORMATS) -> Scanned:
    """The format and size of an image file the online pipeline can read, from its header and its end.

    Raises:
      Unusable: what is wrong with the file.
    """
    f, size = open_head(path, Unusable)
    try:
        with f:
            if size == 0:
                raise Unusable(path, "empty file (0 bytes)")
            image = open_header(f, path, max_pixels)
            header_end = f.tell()  # JPEG: just past the first start-of-scan
            if image.format not in formats:
                raise Unusable(path, f"{image.format} data, though named {os.path.splitext(path)[1]}; the "
                                     f"online decoder reads {' and '.join(formats)}", convertible=True)
            if image.format == "PNG":
                f.seek(0)
                _check_png_chunks(path, f.read())
            else:
                f.seek(max(header_end, size - _TAIL_BYTES))
                if _JPEG_EOI not in f.read():
                    raise Unusable(path, f"truncated JPEG ({size} bytes, no end-of-image marker); "
                                         f"copy or export it again")
    except OSError as e:
        raise Unusable(path, f"unreadable ({e.strerror or e})") from e
    return Scanned(image.format, size, (image.size[1], image.size[0], CHANNELS))


def _check_png_chunks(path: str, data: bytes) -> None:
    """Every chunk up to IEND complete and its CRC right (what libpng checks while decoding)."""
    position = len(_PNG_SIGNATURE)
    while True:
        if position + 8 > len(data):
            raise Unusable(path, f"truncated PNG ({len(data)} bytes, no IEND chunk); copy or export it again")
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        end = position + 8 + length + 4
        if end > len(data):
            raise Unusable(path, f"truncated PNG ({len(data)} bytes, no IEND chunk); copy or export it again")
        crc = struct.unpack(">I", data[end - 4:end])[0]
        if zlib.crc32(data[position + 4:end - 4]) != crc:
            raise Unusable(path, f"damaged PNG: the {kind.decode('latin-1')!r} chunk at byte {position} fails its "
                                 f"CRC check; copy or export it again")
        if kind == b"IEND":
            return
        position = end


def open_header(f, path: str, max_pixels: int) -> Image.Image:
    """PIL's lazily opened image (header only) of an open file, refused above max_pixels.

    Raises:
      Unusable: not an image PIL knows, or too many pixels.
    """
    try:
        image = _open_guarded(f, max_pixels)
    except Image.DecompressionBombError as e:  # over PIL's limit and ours: PIL gives the count only
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


def _open_guarded(f, max_pixels: int) -> Image.Image:
    """Image.open with PIL's own decompression-bomb limit (~179M pixels) raised to `max_pixels`.

    Our guard (max_pixels) speaks instead of PIL's: with max_pixels above PIL's limit, an image
    between the two is within what the user allowed and must open.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            return Image.open(f)
        except Image.DecompressionBombError as e:
            pixels = _BOMB_PIXELS.search(str(e))
            if not pixels or int(pixels.group(1)) > max_pixels:
                raise
        with _PIL_LIMIT_LOCK:  # PIL reads its limit from a module global
            saved, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, max_pixels
            try:
                f.seek(0)
                return Image.open(f)
            finally:
                Image.MAX_IMAGE_PIXELS = saved


def _too_large(path: str, size: str, max_pixels: int) -> Unusable:
    return Unusable(path, f"{size}, over ImageConfig.max_pixels={max_pixels} (decoded it would take 3 bytes "
                          f"a pixel)", too_large=True)


def _looks_like_text(head: bytes) -> bool:
    """UTF-8 printable text (a multi-byte character cut at the end of `head` is allowed)."""
    text = head.decode("utf-8", "replace")
    return text.count("\ufffd") <= 3 and all(c.isprintable() or c.isspace() for c in text.replace("\ufffd", ""))


def _fix(bad: Sequence[FileProblem], paths: Sequence[str]) -> str:
    """The advice that applies to these problems, with the user's real folder in it."""
    folder = fs.common_folder(paths)
    convertible = [getattr(e, "convertible", False) for e in bad]
    too_large = [getattr(e, "too_large", False) for e in bad]
    advice = []
    if any(convertible):
        advice.append(f"re-save GIF/BMP/TIFF/WebP files as JPEG or PNG, or convert the folder with "
                      f"`tfpipe prepare --input {folder} --output SHARDS` (PIL reads them) and train on SHARDS")
    if any(too_large):
        advice.append("downscale the oversized images, or raise --max_pixels (ImageConfig.max_pixels) if "
                      "the machine has the memory for them")
    if not all(c or t for c, t in zip(convertible, too_large)):
        advice.append("remove or replace the files that are empty, truncated or not images "
                      "(prepare --on_error=skip lists them instead)")
    return "; ".join(advice)
