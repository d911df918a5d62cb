"""ImageConfig: the size, dtype and augmentation of the image domain's features."""

from __future__ import annotations

import dataclasses
import math

from tfpipe.config import config_field, validate

CHANNELS = 3  # every image is decoded to RGB: grayscale is repeated, alpha dropped, CMYK converted


@dataclasses.dataclass(frozen=True)
class ImageConfig:
    """Which `{"image": [H, W, 3]}` features the pipeline makes from each image file.

    Train: a random crop (area `min_crop_area`..1 of the image, aspect 3/4..4/3; JPEGs
    decode only the crop), a random left-right flip, resized to (height, width). Eval and
    predict: the central `eval_crop` of the largest region with the output's aspect ratio,
    resized. Normalization (ImageNet mean/std) is the model's job (`ops.normalize`), so
    with dtype "uint8" a batch crosses to the accelerator as bytes, 4x less to copy.

    Attributes:
      height: output rows.
      width: output columns.
      dtype: "float32" (values in [0, 1]) or "uint8" (0..255; the model normalizes).
      min_crop_area: train: smallest share of the image a random crop covers.
      flip: train: flip left-right at random.
      eval_crop: eval/predict: share of each side kept by the center crop.
      max_pixels: images with more pixels (read from the header) are refused before
        decoding: a 20000x20000 image would take 1.2 GB decoded.
      jpeg_quality: offline store="jpeg": quality of the re-encoded, resized JPEGs.
    """

    height: int = config_field(64, "Image height in pixels after crop and resize.", min=8, max=4096)
    width: int = config_field(64, "Image width in pixels after crop and resize.", min=8, max=4096)
    dtype: str = config_field("float32", "Image dtype: 'float32' in [0, 1] or 'uint8' (the model normalizes).",
                        choices=("float32", "uint8"))
    min_crop_area: float = config_field(0.35, "Train: smallest share of the image a random crop covers.",
                                  min=0.05, max=1.0)
    flip: bool = config_field(True, "Train: random left-right flip.")
    eval_crop: float = config_field(0.875, "Eval: share of each side the center crop keeps.", min=0.1, max=1.0)
    max_pixels: int = config_field(40_000_000, "Refuse images with more pixels than this (read from the header).",
                             min=1)
    jpeg_quality: int = config_field(90, "prepare --store jpeg: quality of the resized JPEGs.", min=1, max=100)

    def __post_init__(self):
        validate(self)

    @property
    def channels(self) -> int:
        return CHANNELS

    @property
    def feature_key(self) -> str:
        return "image"

    @property
    def feature_shape(self) -> tuple[int, int, int]:
        """Shape of one example's features."""
        return (self.height, self.width, CHANNELS)

    @property
    def stored_size(self) -> tuple[int, int]:
        """(rows, columns) images are resized to once offline: the eval crop of it is (height, width),
        and train crops still have room to move."""
        return (math.ceil(self.height / self.eval_crop), math.ceil(self.width / self.eval_crop))
