"""Offline images: decode anything PIL reads, convert to RGB, resize once, store JPEG or raw bytes.

Shard writers run this in worker processes (seed 004: "resize once offline"). Each image
is cropped to the largest centred region with the output's aspect ratio and resized to
`ImageConfig.stored_size`, a little larger than (height, width): the eval center crop
of a stored image is the output size, and train crops still have room to move. JPEGs
are decoded at a reduced scale where that still leaves enough pixels (PIL's draft mode,
the same IDCT scaling the online path uses), so a 24-megapixel photo costs a fraction
of a full decode.
"""

from __future__ import annotations

import collections
import io
import os
import stat
from typing import Sequence

import numpy as np
from PIL import Image

from tfpipe.core.domain import Offline, Schema
from tfpipe.domains.image.config import CHANNELS, ImageConfig
from tfpipe.domains.image.scan import ONLINE_FORMATS, Unusable, open_header
from tfpipe.errors import DataError

STORES = ("jpeg", "raw")
JPEG_KEY = "image_jpeg"  # store="jpeg": the re-encoded file, bytes
RAW_KEY = "image"  # store="raw": uint8 [rows, columns, 3]


def load_image(path: str, config: ImageConfig, notes: "collections.Counter | None" = None) -> np.ndarray:
    """Decodes any image PIL reads to uint8 RGB [*config.stored_size, 3], centre-cropped and resized.

    Grayscale is repeated to three channels, alpha dropped (not composited: as the online
    decoder does), CMYK converted, 16-bit values scaled to 8 bits (the top byte, as
    `tf.image.convert_image_dtype`), a GIF's first frame taken.

    Args:
      path: the file.
      config: stored_size and max_pixels.
      notes: if given, counts "converted_format" (not JPEG/PNG), "converted_mode" (not RGB)
        and "upscaled" (smaller than the stored size).

    Returns:
      uint8 [rows, columns, 3] of config.stored_size.

    Raises:
      DataError: not a regular file, empty, truncated, not an image, or over max_pixels, naming it.
    """
    rows, columns = config.stored_size
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise DataError(f"{path}: not a regular file (a pipe, device or socket); remove it")
        if info.st_size == 0:
            raise DataError(f"{path}: empty file (0 bytes); remove it or copy it again")
        with open(path, "rb") as f:
            image = open_header(f, path, config.max_pixels)
            width, height = image.size
            box = _centre_box(width, height, rows, columns)
            scale = min((box[2] - box[0]) / columns, (box[3] - box[1]) / rows)
            if scale >= 2:  # JPEG: decode at 1/2, 1/4 or 1/8 size, still at least the stored size
                image.draft(image.mode, (int(width / scale), int(height / scale)))
                box = _centre_box(*image.size, rows, columns)
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
        notes["upscaled"] += (box[2] - box[0]) < columns or (box[3] - box[1]) < rows
    resized = pixels.resize((columns, rows), Image.BILINEAR, box=box)
    return np.asarray(resized, np.uint8)


def _centre_box(width: int, height: int, rows: int, columns: int) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of the largest centred region with aspect columns:rows."""
    scale = min(height / rows, width / columns)
    crop_w, crop_h = max(1, round(columns * scale)), max(1, round(rows * scale))
    left, top = (width - crop_w) // 2, (height - crop_h) // 2
    return (left, top, left + crop_w, top + crop_h)


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
    """load = load_image (decode, RGB, resize once); featurize = stack raw bytes or re-encode as JPEG."""

    def __init__(self, config: ImageConfig, store: str):
        if store not in STORES:
            raise ValueError(f"store={store!r}: allowed values are {', '.join(map(repr, STORES))}")
        self.config, self.store = config, store
        rows, columns = config.stored_size
        if store == "jpeg":
            self.schema = Schema({JPEG_KEY: ("bytes", ())})
        else:
            self.schema = Schema({RAW_KEY: ("uint8", (rows, columns, CHANNELS))})
        self._notes: collections.Counter = collections.Counter()

    def load(self, path: str) -> np.ndarray:
        return load_image(path, self.config, self._notes)

    def featurize(self, loaded: Sequence[np.ndarray]) -> dict:
        if self.store == "jpeg":
            return {JPEG_KEY: np.array([encode_jpeg(p, self.config.jpeg_quality) for p in loaded], dtype=object)}
        rows, columns = self.config.stored_size
        return {RAW_KEY: np.stack(loaded) if len(loaded) else np.zeros((0, rows, columns, CHANNELS), np.uint8)}

    def notes(self) -> dict:
        return dict(self._notes)
