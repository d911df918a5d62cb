"""Offline images: decode anything PIL reads, convert to RGB, scale down once, store JPEG or raw bytes.

Shard writers run this in worker processes (seed 004: "resize once offline"; FFCV's
bounded resolution). Each image keeps its aspect ratio and is scaled down so its shorter
side is `ImageConfig.stored_short_side` (256 for 224 x 224 crops; never enlarged): every
crop the online path would take is still there, at the resolution the output needs, and
decoding a stored image costs a fraction of the original. JPEGs are decoded at a reduced
scale where that still leaves enough pixels (PIL's draft mode, the same IDCT scaling the
online path uses), so a 24-megapixel photo costs a fraction of a full decode. Stored as a
re-encoded JPEG (`jpeg`, small) or as raw uint8 pixels with their shape (`raw`: nothing to
decode when read, ~3-6x the bytes).
"""

from __future__ import annotations

import collections
import errno
import io
from typing import Sequence

import numpy as np
from PIL import Image

from tfpipe.core import filesystem as fs
from tfpipe.core.domain import Offline, Schema
from tfpipe.domains.image.config import CHANNELS, STORES, ImageConfig
from tfpipe.domains.image.scan import ONLINE_FORMATS, Unusable, open_header
from tfpipe.errors import DataError

JPEG_KEY = "image_jpeg"  # store="jpeg": the re-encoded file, bytes
RAW_KEY = "image_raw"  # store="raw": the uint8 pixels, row-major [rows, columns, 3], as bytes
SHAPE_KEY = "image_shape"  # store="raw": [rows, columns, 3], int32
FIXED_RAW_KEY = "image"  # store="raw" before max_side: uint8 [*stored_size, 3] (still read, no longer written)


def load_image(path: str, config: ImageConfig, notes: "collections.Counter | None" = None) -> np.ndarray:
    """Decodes any image PIL reads to uint8 RGB, its shorter side scaled down to config.stored_short_side.

    Grayscale is repeated to three channels, alpha dropped (not composited: as the online
    decoder does), CMYK converted, 16-bit values scaled to 8 bits (the top byte, as
    `tf.image.convert_image_dtype`), a GIF's first frame taken. The aspect ratio is kept;
    an image already small enough keeps its size.

    Args:
      path: the file.
      config: stored_short_side and max_pixels.
      notes: if given, counts "converted_format" (not JPEG/PNG), "converted_mode" (not RGB)
        and "downscaled".

    Returns:
      uint8 [rows, columns, 3], min(rows, columns) <= config.stored_short_side.

    Raises:
      DataError: not a regular file, empty, truncated, not an image, or over max_pixels, naming it.
    """
    try:
        try:
            f, size = fs.read_head(path)  # a remote file's bytes come through tf.io.gfile
        except OSError as e:
            if e.errno == errno.ESPIPE:
                raise DataError(f"{path}: not a regular file (a pipe, device or socket); remove it") from None
            raise
        if size == 0:
            f.close()
            raise DataError(f"{path}: empty file (0 bytes); remove it or copy it again")
        with f:
            image = open_header(f, path, config.max_pixels)
            size = stored_size(*image.size, config.stored_short_side)
            if size != image.size:  # JPEG: decode at 1/2, 1/4 or 1/8 size, still at least the stored size
                image.draft(image.mode, size)
            image.load()  # decodes; raises OSError on truncated data
            fmt = image.format
            pixels = _rgb(image)
    except Unusable as e:
        raise DataError(f"{e}; remove or replace it") from None
    except (OSError, SyntaxError, ValueError) as e:  # PIL's decoders raise these on damaged data
        raise DataError(f"{path}: damaged or truncated image ({e}); copy or export it again") from e
    if notes is not None:
        notes["converted_format"] += fmt not in ONLINE_FORMATS
        notes["converted_mode"] += image.mode != "RGB"
        notes["downscaled"] += pixels.size != size
    if pixels.size != size:
        pixels = pixels.resize(size, Image.BILINEAR)  # PIL widens the filter when shrinking: no aliasing
    return np.asarray(pixels, np.uint8)


def stored_size(width: int, height: int, short_side: int) -> tuple[int, int]:
    """(width, height) scaled down, aspect kept, so the shorter side is at most `short_side`."""
    scale = short_side / min(width, height)
    if scale >= 1:
        return (width, height)
    return (max(1, round(width * scale)), max(1, round(height * scale)))


def _rgb(image: Image.Image) -> Image.Image:
    """RGB with 8 bits a channel, as ops.decode_rgb makes it."""
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):  # 16-bit gray: keep the top byte, don't clip
        values = np.asarray(image).astype(np.uint32) >> 8
        return Image.fromarray(np.clip(values, 0, 255).astype(np.uint8), "L").convert("RGB")
    return image.convert("RGB")


def encode_jpeg(pixels: np.ndarray, quality: int) -> bytes:
    """uint8 [rows, columns, 3] as a baseline JPEG (4:2:0, like most cameras' files)."""
    out = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(out, "JPEG", quality=quality)
    return out.getvalue()


class ImageOffline(Offline):
    """load = load_image (decode, RGB, scale down once); featurize = re-encode as JPEG, or the raw pixels."""

    def __init__(self, config: ImageConfig, store: str):
        if store not in STORES:
            raise ValueError(f"store={store!r}: allowed values are {', '.join(map(repr, STORES))}")
        self.config, self.store = config, store
        if store == "jpeg":
            self.schema = Schema({JPEG_KEY: ("bytes", ())})
        else:
            self.schema = Schema({RAW_KEY: ("bytes", ()), SHAPE_KEY: ("int32", (3,))})
        self._notes: collections.Counter = collections.Counter()

    def load(self, path: str) -> np.ndarray:
        return load_image(path, self.config, self._notes)

    def featurize(self, loaded: Sequence[np.ndarray]) -> dict:
        if self.store == "jpeg":
            return {JPEG_KEY: np.array([encode_jpeg(p, self.config.jpeg_quality) for p in loaded], dtype=object)}
        return {RAW_KEY: np.array([np.ascontiguousarray(p).tobytes() for p in loaded], dtype=object),
                SHAPE_KEY: np.array([p.shape for p in loaded], np.int32).reshape(-1, CHANNELS)}

    def notes(self) -> dict:
        return dict(self._notes)
