"""ImageConfig: the size, dtype and augmentation of the image domain's features; what its shards store
and what its synthetic corpus takes (no TensorFlow, no numpy: the command line's flags read these)."""

from __future__ import annotations

import dataclasses
import math

from tfpipe.config import config_field, validate

CHANNELS = 3  # every image is decoded to RGB: grayscale is repeated, alpha dropped, CMYK converted
STORES = ("jpeg", "raw")  # what shards may store (the first: the default)


@dataclasses.dataclass(frozen=True)
class ImageConfig:
    """Which `{"image": [H, W, 3]}` features the pipeline makes from each image file.

    Train: a random crop (area `min_crop_area`..1 of the image, aspect 3/4..4/3: the
    Inception/ResNet distribution; JPEGs decode only the crop, at 1/2-1/8 scale when the
    crop is at least twice the output), a random left-right flip, resized to (height,
    width). Eval and predict: the central `eval_crop` of the largest region with the
    output's aspect ratio, resized. Each example is made as uint8; the cast to float32
    (and `normalize`) runs on whole batches. With dtype "uint8" a batch crosses to the
    accelerator as bytes, 4x less to copy, and the model normalizes (`ops.normalize`).

    Attributes:
      height: output rows.
      width: output columns.
      dtype: "float32" (values in [0, 1], or normalized) or "uint8" (0..255; the model normalizes).
      normalize: float32 only: (x - ImageNet mean) / std per channel, on whole batches.
      min_crop_area: train: smallest share of the image a random crop covers.
      flip: train: flip left-right at random.
      eval_crop: eval/predict: share of each side kept by the center crop.
      dct_method: JPEG inverse DCT: "INTEGER_FAST" (libjpeg's fast integer IDCT) or
        "INTEGER_ACCURATE" (TensorFlow's default); BUILD_NOTES gives the PSNR cost.
      fancy_upscaling: JPEG chroma upsampling by interpolation (TensorFlow's default) rather
        than by pixel replication; the cheaper one costs little against 4:2:0 chroma.
      scaled_decode: decode a JPEG crop at 1/2, 1/4 or 1/8 scale while it stays at least the output size.
      max_pixels: images with more pixels (read from the header) are refused before
        decoding: a 20000x20000 image would take 1.2 GB decoded.
      max_side: prepare: images are stored with their shorter side scaled down to this many
        pixels (aspect kept, never enlarged); 0: the eval crop's need, ceil(max(height,
        width) / eval_crop) (256 for 224 x 224).
      jpeg_quality: prepare --store jpeg: quality of the re-encoded, resized JPEGs.
    """

    height: int = config_field(64, "Image height in pixels after crop and resize.", min=8, max=4096)
    width: int = config_field(64, "Image width in pixels after crop and resize.", min=8, max=4096)
    dtype: str = config_field("float32", "Image dtype: 'float32' in [0, 1] or 'uint8' (the model normalizes).",
                              choices=("float32", "uint8"))
    normalize: bool = config_field(False, "float32 images: subtract the ImageNet mean and divide by its std "
                                          "per channel, on whole batches.")
    min_crop_area: float = config_field(0.08, "Train: smallest share of the image a random crop covers "
                                              "(0.08: the Inception/ResNet distribution).", min=0.01, max=1.0)
    flip: bool = config_field(True, "Train: random left-right flip.")
    eval_crop: float = config_field(0.875, "Eval: share of each side the center crop keeps.", min=0.1, max=1.0)
    dct_method: str = config_field("INTEGER_FAST", "JPEG inverse DCT: libjpeg's fast integer one, or "
                                                   "INTEGER_ACCURATE (TensorFlow's default).",
                                   choices=("INTEGER_FAST", "INTEGER_ACCURATE"))
    fancy_upscaling: bool = config_field(False, "JPEG chroma upsampling by interpolation (TensorFlow's default) "
                                                "instead of pixel replication.")
    scaled_decode: bool = config_field(True, "Decode a JPEG crop at 1/2, 1/4 or 1/8 scale while it stays at "
                                             "least the output size.")
    max_pixels: int = config_field(40_000_000, "Refuse images with more pixels than this (read from the header).",
                                   min=1)
    max_side: int = config_field(0, "prepare: store images with their SHORTER side scaled down to this many "
                                    "pixels (aspect kept, never enlarged); 0: ceil(max(height, width) / eval_crop), "
                                    "e.g. 256 for 224x224.", min=0, max=65535)
    jpeg_quality: int = config_field(90, "prepare --store jpeg: quality of the resized JPEGs.", min=1, max=100)

    def __post_init__(self):
        validate(self)
        if self.normalize and self.dtype != "float32":
            raise ValueError(f"ImageConfig.normalize=True with dtype={self.dtype!r}: normalized values are float; "
                             f"pass dtype='float32', or normalize in the model (ops.normalize) for uint8 batches")

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

    @property
    def stored_short_side(self) -> int:
        """The shorter side `tfpipe prepare` stores images at (max_side, or what the eval crop needs)."""
        return self.max_side or max(self.stored_size)


@dataclasses.dataclass(frozen=True)
class ImageCorpusConfig:
    """What the synthetic image corpus takes besides its size and seed (`tfpipe synth` flags).

    Attributes:
      size: (smallest, largest) side in pixels; each image's height and width are drawn from it.
    """

    size: tuple = config_field((64, 256), "Smallest,largest side in pixels; each image's height and width are "
                                          "drawn between them.")

    def __post_init__(self):
        object.__setattr__(self, "size", _sides(self.size))
        validate(self)


def _sides(value: object) -> tuple[int, int]:
    """(smallest, largest) from a pair or 'a,b' text (a flag's list)."""
    parts = value.split(",") if isinstance(value, str) else list(value)  # type: ignore[call-overload]
    try:
        low, high = (int(str(p).strip()) for p in parts)
    except ValueError:
        raise ValueError(f"ImageCorpusConfig.size={','.join(map(str, parts))}: expected two sizes in pixels, "
                         f"smallest,largest (e.g. 64,256)") from None
    return low, high
