"""A learnable synthetic image corpus: the embedded default data of the image demo, tests and bench.

Eight classes, each drawn with random colours, size, position and background, so a
small CNN learns them well but has to look at shape or texture, not at a colour:

  circle     filled disc               ring       thick circle outline
  square     filled square             cross      plus sign of two bars
  triangle   filled upright triangle   checker    checkerboard patch
  stripes_h  horizontal stripes patch  stripes_v  vertical stripes patch

Images vary the way a real folder does: sizes between `size[0]` and `size[1]` pixels a
side at any aspect ratio, two thirds JPEG (quality 70-95) and one third PNG, about 10 %
grayscale, and a few RGBA PNGs and CMYK JPEGs, all of which the image domain reads.
Written under `<out_dir>/<class>/<class>_<i>.jpg|png`; the same arguments always write
the same bytes.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Union

import numpy as np
from PIL import Image, ImageDraw
from tqdm import tqdm

from tfpipe.core import corpus

if TYPE_CHECKING:
    from tfpipe.core.files import FileSource

CLASS_NAMES = ("checker", "circle", "cross", "ring", "square", "stripes_h", "stripes_v", "triangle")
MARKER = corpus.MARKER
_MIN_CONTRAST = 90.0  # RGB distance between shape and background colours
_MIN_LUMA = 40.0  # and brightness difference, so grayscale copies keep the shape visible


def write_corpus(out_dir: Union[str, os.PathLike], per_class: int = 150, size: tuple[int, int] = (64, 256),
                 seed: int = 0, progress: bool = True) -> FileSource:
    """`write_files`, then the corpus as a FileSource (domain "image"), class names sorted."""
    from tfpipe.core.source import find  # TensorFlow: only once a Source is asked for

    return find(write_files(out_dir, per_class, size, seed, progress))


def write_files(out_dir: Union[str, os.PathLike], per_class: int = 150, size: tuple[int, int] = (64, 256),
                seed: int = 0, progress: bool = True) -> str:
    """Writes the synthetic image corpus (one subfolder per class) and returns the folder.

    numpy and Pillow only, no TensorFlow: `tfpipe synth` starts in a fraction of a second.

    If `out_dir` already holds the corpus these arguments describe (its synth.json
    matches), nothing is rewritten; an interrupted or different earlier corpus is replaced.

    Args:
      out_dir: folder to write; created if missing. It may hold only this corpus.
      per_class: images per class.
      size: (smallest, largest) side in pixels; each image's height and width are drawn from it.
      seed: the corpus is a pure function of (seed, per_class, size).
      progress: show a tqdm bar.

    Returns:
      out_dir.

    Raises:
      ValueError: bad arguments, or `out_dir` holds folders or files that are not this corpus.
    """
    low, high = size
    if per_class < 1:
        raise ValueError(f"per_class={per_class}: must be >= 1")
    if not 16 <= low <= high <= 4096:
        raise ValueError(f"size={size}: need 16 <= smallest <= largest <= 4096 pixels")
    out_dir = os.fspath(out_dir)
    spec = {"format": "tfpipe-synth-image", "version": 1, "classes": list(CLASS_NAMES), "per_class": per_class,
            "size": [low, high], "seed": seed}
    if corpus.is_complete(out_dir, spec):
        return out_dir
    with corpus.writing(out_dir, spec, CLASS_NAMES, "image corpus"), \
            tqdm(total=per_class * len(CLASS_NAMES), desc="synth", unit="image", disable=not progress) as bar:
        for class_id, name in enumerate(CLASS_NAMES):
            class_dir = os.path.join(out_dir, name)
            os.makedirs(class_dir, exist_ok=True)
            _clear(class_dir)  # an earlier corpus may have saved the same index in the other format
            for i in range(per_class):
                rng = np.random.default_rng([seed, class_id, i])
                image = draw(name, (int(rng.integers(low, high + 1)), int(rng.integers(low, high + 1))), rng)
                _save(image, os.path.join(class_dir, f"{name}_{i:05d}"), rng)
                bar.update(1)
    return out_dir


def draw(name: str, size: tuple[int, int], rng: np.random.Generator) -> Image.Image:
    """One RGB image of class `name`, size (width, height): noisy background, one shape or patch.

    Raises:
      ValueError: unknown class name.
    """
    if name not in CLASS_NAMES:
        raise ValueError(f"unknown synthetic class {name!r}: allowed values are {', '.join(CLASS_NAMES)}")
    width, height = size
    background = rng.uniform(0, 255, 3)
    colour = rng.uniform(0, 255, 3)
    while (np.linalg.norm(colour - background) < _MIN_CONTRAST
           or abs(_luma(colour) - _luma(background)) < _MIN_LUMA):
        colour = rng.uniform(0, 255, 3)
    # A gentle gradient and pixel noise, so no class is one flat colour.
    ramp = np.linspace(-1, 1, width)[None, :, None] * rng.uniform(-20, 20, 3)
    pixels = background + ramp + rng.normal(0, 8, (height, width, 3))
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")
    side = min(width, height) * rng.uniform(0.45, 0.7)  # the shape's extent
    cx = width / 2 + rng.uniform(-0.12, 0.12) * width
    cy = height / 2 + rng.uniform(-0.12, 0.12) * height
    box = (cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2)
    fill = tuple(int(c) for c in colour)
    pen = ImageDraw.Draw(image)
    if name == "circle":
        pen.ellipse(box, fill=fill)
    elif name == "ring":
        pen.ellipse(box, outline=fill, width=max(2, int(side * rng.uniform(0.1, 0.16))))
    elif name == "square":
        pen.rectangle(box, fill=fill)
    elif name == "cross":
        bar = side * rng.uniform(0.12, 0.22) / 2
        pen.rectangle((box[0], cy - bar, box[2], cy + bar), fill=fill)
        pen.rectangle((cx - bar, box[1], cx + bar, box[3]), fill=fill)
    elif name == "triangle":
        pen.polygon([(cx, box[1]), (box[2], box[3]), (box[0], box[3])], fill=fill)
    else:  # patterns over a square patch; the period scales with the image, so resizing keeps it
        period = max(4.0, side * rng.uniform(0.15, 0.25))
        ys, xs = np.mgrid[0:height, 0:width]
        inside = (abs(xs - cx) <= side / 2) & (abs(ys - cy) <= side / 2)
        row_band = np.floor((ys - box[1]) / (period / 2))
        column_band = np.floor((xs - box[0]) / (period / 2))
        bands = {"stripes_h": row_band, "stripes_v": column_band, "checker": row_band + column_band}[name]
        on = bands % 2 == 0
        pixels = np.asarray(image).copy()
        pixels[inside & on] = fill
        image = Image.fromarray(pixels, "RGB")
    return image


def _luma(rgb: np.ndarray) -> float:
    """Brightness as PIL's convert("L") computes it (ITU-R 601)."""
    return float(rgb @ np.array([0.299, 0.587, 0.114]))


def _save(image: Image.Image, stem: str, rng: np.random.Generator) -> None:
    """As JPEG (2/3) or PNG (1/3); some grayscale, some RGBA PNG or CMYK JPEG."""
    jpeg = rng.uniform() < 2 / 3
    kind = rng.uniform()
    if kind < 0.1:
        image = image.convert("L")
    elif kind < 0.14:
        image = image.convert("CMYK") if jpeg else image.convert("RGBA")
    if jpeg:
        image.save(stem + ".jpg", "JPEG", quality=int(rng.integers(70, 96)))
    else:
        image.save(stem + ".png", "PNG")


def _clear(class_dir: str) -> None:
    """Deletes what an earlier, different or interrupted corpus left in class_dir."""
    for entry in os.listdir(class_dir):
        os.remove(os.path.join(class_dir, entry))
