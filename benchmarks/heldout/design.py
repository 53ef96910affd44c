"""The photographs, the split into halves and the balanced design of cases.

The split is fixed in code, not drawn: ``PHOTOS`` names each half's photographs and
``SEEDS`` each half's seeds (noise and random-weight seeds), so the halves share no
photograph and no seed. Trained weights are trained on the calibration photographs only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.heldout.nets import ARCHS, TINY

__all__ = ["ARCHS", "TINY"]

#: calibrate: where constants are chosen; report: the held-out half; fresh: a second held-out
#: set (photographs and seeds no half used), measured once per change of the defaults made
#: after the report half had been seen, so that a report is always a first look
HALVES = ("calibrate", "report", "fresh")
#: scikit-image's bundled photographs (offline in its wheel), and the 256 x 256 region of
#: each that is resized to the case's side: (top, left) of the region
PHOTOS: dict[str, dict[str, tuple[int, int]]] = {
    "calibrate": {"astronaut": (40, 180), "coffee": (72, 172), "chelsea": (22, 97),
                  "immunohistochemistry": (128, 128)},
    "report": {"rocket": (85, 192), "camera": (40, 140), "retina": (578, 578),
               "coins": (23, 64)},
    "fresh": {"hubble_deep_field": (308, 372), "moon": (128, 128), "clock": (22, 72),
              "cell": (202, 147)},
}
SEEDS = {"calibrate": (0, 1, 2), "report": (3, 4, 5), "fresh": (6, 7, 8)}
#: noise std as a fraction of the clean output's RMS (0: no noise)
NOISES = (0.0, 0.005, 0.01, 0.05)
REGION = 256
SIDE = 64
#: the size cases: resnet18's stem + layer1 at larger crops (whole-run and memory bars)
SIZES = (128, 224)


@dataclass(frozen=True)
class Case:
    half: str
    arch: str
    weights: str  # "random" or "trained"
    photo: str
    seed: int
    noise: float  # fraction of the output's RMS
    side: int = SIDE

    @property
    def key(self) -> str:
        return (f"{self.half}/{self.arch}/{self.weights}/{self.photo}/s{self.seed}/"
                f"n{self.noise:g}/{self.side}")


def photograph(name: str, side: int) -> np.ndarray:
    """The photograph's 256 x 256 region resized to side x side: uint8 RGB (grey repeated)."""
    from PIL import Image
    from skimage import data

    img = getattr(data, name)()
    top, left = next(p[name] for p in PHOTOS.values() if name in p)
    region = np.ascontiguousarray(img[top:top + REGION, left:left + REGION])
    if region.ndim == 2:
        region = np.repeat(region[..., None], 3, axis=2)
    region = region[..., :3]
    if side != REGION:
        region = np.asarray(Image.fromarray(region).resize((side, side),
                                                           Image.Resampling.LANCZOS))
    return region


def write_png(name: str, side: int, folder: Path) -> Path:
    from PIL import Image

    path = folder / f"{name}{side}.png"
    Image.fromarray(photograph(name, side)).save(path)
    return path


def cases(half: str, archs: list[str] | None = None) -> list[Case]:
    """Four cases per architecture: each noise level once, random and trained weights twice
    each, the pairing and the photographs and seeds rotating with the architecture; then the
    size cases (resnet18 ONNX, random weights, 1 % noise). Ordered so that a run stopped
    early has measured every architecture: the random-weight cases round by round (every
    architecture's first, then its second), then the trained ones (which train first)."""
    photos, seeds = list(PHOTOS[half]), SEEDS[half]
    names = [n for n in ARCHS if not archs or n in archs]
    out = []
    for j, noise in enumerate(NOISES):
        for name in names:
            a = list(ARCHS).index(name)
            out.append(Case(half, name, "trained" if (a + j) % 2 == 0 else "random",
                            photos[(a + j) % len(photos)], seeds[(a + 2 * j) % len(seeds)],
                            noise))
    out.sort(key=lambda c: c.weights == "trained")  # stable: the rounds stay in order
    if not archs or "resnet18-onnx" in archs:
        out += [Case(half, "resnet18-onnx", "random", photos[k], seeds[k], 0.01, side)
                for k, side in enumerate(SIZES)]
    return out


def quick_case(half: str = "calibrate") -> Case:
    return Case(half, TINY.name, "random", next(iter(PHOTOS[half])), SEEDS[half][0], 0.01,
                side=16)
