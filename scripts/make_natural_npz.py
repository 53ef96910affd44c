"""Build ``resources/datasets/natural_rgb.npz``: colour photographs for natural-image networks.

Why this exists: lbi must work offline, and every bundled network so far sees 28x28 grey
digits. scikit-image (a dependency) carries a handful of colour photographs inside its wheel
(``skimage/data/*.png|jpg``, not fetched later), each CC0 or public domain (the licence is in
the docstring of the ``skimage.data`` function named below). This script downsizes them and
stores the pixels plus a fixed list of patch positions, so the dataset is a few MB and every
patch is addressed by ``(split, index)``.

The split is **by source image**: no validation patch shares a photograph with a training
patch (adjacent patches of one photograph are strongly correlated, so a random patch split
would measure memorisation).

- train: coffee, rocket, hubble_deep_field, immunohistochemistry, retina
- val: astronaut, chelsea

Each photograph is stored at two scales (short side 256 and 128, box-filtered by Pillow); a
patch is ``(image, scale, top, left)`` of side ``PATCH`` (32) at one of them. Positions are
drawn once with ``numpy.random.default_rng(SEED)`` and stored, so later numpy versions cannot
change the dataset. Patches whose standard deviation is below ``FLAT_STD`` (sky, black
background of the Hubble field and the retina) are skipped: they teach an autoencoder nothing
and make PSNR meaningless.

Usage (from the repository root)::

    python scripts/make_natural_npz.py

The sha256 of every source file and of the npz go into ``resources/datasets/PROVENANCE.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_mnist_npz import npz_bytes, sha256_bytes  # noqa: E402  (same deterministic writer)

TRAIN = ("coffee", "rocket", "hubble_deep_field", "immunohistochemistry", "retina")
VAL = ("astronaut", "chelsea")
# skimage.data function -> file in the wheel (hashes make a silently changed image visible)
FILES = {"coffee": "coffee.png", "rocket": "rocket.jpg", "hubble_deep_field":
         "hubble_deep_field.jpg", "immunohistochemistry": "ihc.png", "retina": "retina.jpg",
         "astronaut": "astronaut.png", "chelsea": "chelsea.png"}
SHORT_SIDES = (256, 128)
PATCH = 32
SEED = 20261127
N_TRAIN = 6000
N_VAL = 600
FLAT_STD = 0.04


def _downsize(image: np.ndarray, short: int) -> np.ndarray:
    from PIL import Image

    h, w = image.shape[:2]
    scale = short / min(h, w)
    size = (max(PATCH, round(w * scale)), max(PATCH, round(h * scale)))
    return np.asarray(Image.fromarray(image).resize(size, Image.Resampling.BOX), dtype=np.uint8)


def _positions(images: list[list[np.ndarray]], first: int, n: int,
               rng: np.random.Generator) -> np.ndarray:
    """``n`` rows (image, scale, top, left) of non-flat patches; images drawn in turn."""
    rows: list[tuple[int, int, int, int]] = []
    k = 0
    while len(rows) < n:
        i = k % len(images)
        s = int(rng.integers(len(SHORT_SIDES)))
        img = images[i][s]
        top = int(rng.integers(img.shape[0] - PATCH + 1))
        left = int(rng.integers(img.shape[1] - PATCH + 1))
        k += 1
        if float((img[top:top + PATCH, left:left + PATCH] / 255.0).std()) < FLAT_STD:
            continue
        rows.append((first + i, s, top, left))
    return np.asarray(rows, dtype=np.int32)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1]
                        / "resources" / "datasets" / "natural_rgb.npz")
    args = parser.parse_args(argv)
    import skimage
    import skimage.data

    data_dir = Path(skimage.__file__).parent / "data"
    names = TRAIN + VAL
    scaled: list[list[np.ndarray]] = []
    for name in names:
        raw = (data_dir / FILES[name]).read_bytes()
        image = np.asarray(getattr(skimage.data, name)())[..., :3]
        print(f"{name:22s} {FILES[name]:24s} {image.shape} sha256 {sha256_bytes(raw)}")
        scaled.append([_downsize(image, s) for s in SHORT_SIDES])
    rng = np.random.default_rng(SEED)
    train = _positions(scaled[:len(TRAIN)], 0, N_TRAIN, rng)
    val = _positions(scaled[len(TRAIN):], len(TRAIN), N_VAL, rng)
    arrays: dict[str, np.ndarray] = {"names": np.array(names), "train_patches": train,
                                     "val_patches": val, "patch": np.array(PATCH)}
    for i, per_scale in enumerate(scaled):
        for s, img in enumerate(per_scale):
            arrays[f"image_{i}_{s}"] = img
    data = npz_bytes(arrays)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".npz.tmp")
    tmp.write_bytes(data)
    tmp.replace(args.out)  # atomic: a half-written npz never replaces a good one
    print(f"skimage {skimage.__version__}; wrote {args.out} ({len(data)} bytes) "
          f"sha256 {hashlib.sha256(data).hexdigest()}; train {len(train)} val {len(val)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
