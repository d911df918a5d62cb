"""Tiny JPEGs for measuring what a chain spends per element: decode then costs next to nothing.

Cuts NUM_IMAGES 32x32 JPEGs (quality 90) from the photos that ship with scikit-image and
scikit-learn (docs/examples/photo_corpus.py's sources: 10 classes, nothing downloaded); each
image is a random crop of its class's photo, scaled down. Read with 16x16 crops and batch 64,
a chain's rate is its fixed cost per element (the issue-35 benchmark):

    python docs/examples/tiny_jpegs.py OUT_DIR [NUM_IMAGES=2000] [SEED=0]
    taskset -c 0 tfpipe bench --data OUT_DIR --variants optimized,tf-models --height 16 --width 16 \\
        --batch_size 64 --rounds 5

Needs `pip install -e '.[photos]'`.
"""

from __future__ import annotations

import io
import os
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from photo_corpus import source_photos  # noqa: E402  (the same wheel-shipped photos)

SIDE = 32  # pixels


def write_corpus(out_dir: str, num_images: int = 2000, seed: int = 0) -> list[str]:
    """Writes OUT_DIR/<class>/<class>_<i>.jpg, NUM_IMAGES in all; returns the paths."""
    photos = source_photos()
    paths = []
    for class_id, (name, photo) in enumerate(photos.items()):
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
        height, width = photo.shape[:2]
        count = num_images // len(photos) + (class_id < num_images % len(photos))
        for i in range(count):
            rng = np.random.default_rng([seed, class_id, i])
            side = int(rng.integers(min(height, width) // 4, min(height, width) + 1))
            y, x = int(rng.integers(0, height - side + 1)), int(rng.integers(0, width - side + 1))
            image = Image.fromarray(photo[y:y + side, x:x + side]).resize((SIDE, SIDE), Image.BICUBIC)
            out = io.BytesIO()
            image.save(out, "JPEG", quality=90)
            path = os.path.join(out_dir, name, f"{name}_{i:05d}.jpg")
            with open(path, "wb") as f:
                f.write(out.getvalue())
            paths.append(path)
    return paths


if __name__ == "__main__":
    if not 2 <= len(sys.argv) <= 4:
        sys.exit(__doc__.strip().splitlines()[5].strip())
    written = write_corpus(sys.argv[1], *(int(a) for a in sys.argv[2:]))
    print(f"{len(written)} {SIDE}x{SIDE} JPEGs in {sys.argv[1]}")
