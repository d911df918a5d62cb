"""An ImageNet-like photo folder cut from the sample photos that ship with scikit-image and scikit-learn.

Real photographs (not drawn shapes) at ImageNet's sizes and compression, for benchmarking
image pipelines: each of 10 classes is one source photo, and each image a random crop of
it (25-100 % of the area, aspect 3:5-5:3), flipped at random, scaled so its long side is
320-640 px, saved as a JPEG of quality 82-94 (about 45 KB on average). Only files that
ship inside the scikit-image and scikit-learn wheels are read; nothing is downloaded. The
same arguments always write the same bytes. Needs `pip install -e '.[photos]'`.

    python docs/examples/photo_corpus.py OUT_DIR [NUM_IMAGES=2000] [SEED=0]

Writes OUT_DIR/<class>/<class>_<i>.jpg, NUM_IMAGES in all (an equal share per class).
"""

from __future__ import annotations

import io
import os
import sys

import numpy as np
from PIL import Image

# (class, file in skimage's data folder): the colour photographs its wheel ships.
_SKIMAGE_PHOTOS = (
    ("astronaut", "astronaut.png"), ("cat", "chelsea.png"), ("coffee", "coffee.png"),
    ("rocket", "rocket.jpg"), ("galaxies", "hubble_deep_field.jpg"), ("tissue", "ihc.png"),
    ("retina", "retina.jpg"), ("motorcycle", "motorcycle_left.png"),
)
_SKLEARN_PHOTOS = (("temple", "china.jpg"), ("flower", "flower.jpg"))  # sklearn.datasets.load_sample_images
LONG_SIDE = (320, 640)  # pixels, as ImageNet's typical photos
_AREA = (0.25, 1.0)  # share of the source photo each image shows
_ASPECT = (3 / 5, 5 / 3)
_QUALITY = (82, 94)  # JPEG quality: ~45 KB on average at these sizes


def source_photos() -> dict[str, np.ndarray]:
    """{class: uint8 RGB photo} from the files inside the installed wheels (no download)."""
    import skimage.data
    import sklearn.datasets

    folders = [(os.path.dirname(skimage.data.__file__), _SKIMAGE_PHOTOS),  # the wheel's own files
               (os.path.join(os.path.dirname(sklearn.datasets.__file__), "images"), _SKLEARN_PHOTOS)]
    photos = {}
    for folder, names in folders:
        for name, file in names:
            with Image.open(os.path.join(folder, file)) as image:
                photos[name] = np.asarray(image.convert("RGB"))
    return dict(sorted(photos.items()))


def cut(photo: np.ndarray, rng: np.random.Generator) -> bytes:
    """One JPEG: a random crop of `photo`, maybe flipped, long side in LONG_SIDE."""
    height, width = photo.shape[:2]
    for _ in range(20):  # a crop of this area and aspect that fits; else the whole photo
        area = rng.uniform(*_AREA) * height * width
        aspect = np.exp(rng.uniform(np.log(_ASPECT[0]), np.log(_ASPECT[1])))
        w, h = int(round(np.sqrt(area * aspect))), int(round(np.sqrt(area / aspect)))
        if w <= width and h <= height:
            break
    else:
        w, h = width, height
    x, y = int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1))
    image = Image.fromarray(photo[y:y + h, x:x + w])
    if rng.uniform() < 0.5:
        image = image.transpose(Image.FLIP_LEFT_RIGHT)
    scale = rng.uniform(*LONG_SIDE) / max(w, h)
    image = image.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.BICUBIC)
    out = io.BytesIO()
    image.save(out, "JPEG", quality=int(rng.integers(_QUALITY[0], _QUALITY[1] + 1)))
    return out.getvalue()


def write_corpus(out_dir: str, num_images: int = 2000, seed: int = 0) -> list[str]:
    """Writes the folder (one subfolder per class); returns the paths written.

    Raises:
      ValueError: num_images is below the number of classes, or out_dir holds other files.
    """
    photos = source_photos()
    if num_images < len(photos):
        raise ValueError(f"num_images={num_images}: at least one per class ({len(photos)})")
    if os.path.isdir(out_dir) and set(os.listdir(out_dir)) - set(photos):
        raise ValueError(f"{out_dir}: holds files other than this corpus' class folders; pick an empty folder")
    paths = []
    for class_id, (name, photo) in enumerate(photos.items()):
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
        count = num_images // len(photos) + (class_id < num_images % len(photos))
        for i in range(count):
            path = os.path.join(out_dir, name, f"{name}_{i:05d}.jpg")
            with open(path, "wb") as f:
                f.write(cut(photo, np.random.default_rng([seed, class_id, i])))
            paths.append(path)
    return paths


def main(argv: list[str]) -> None:
    if not 2 <= len(argv) <= 4:
        sys.exit(__doc__.strip().splitlines()[-3].strip())
    paths = write_corpus(argv[1], *(int(a) for a in argv[2:]))
    sizes = [os.path.getsize(p) for p in paths]
    print(f"{len(paths)} JPEGs in {argv[1]}: {np.mean(sizes) / 1e3:.0f} KB on average "
          f"({min(sizes) / 1e3:.0f}-{max(sizes) / 1e3:.0f} KB)")


if __name__ == "__main__":
    main(sys.argv)
