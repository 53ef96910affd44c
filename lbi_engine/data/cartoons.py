"""Synthetic piecewise-constant ("cartoon") images, generated on demand from a seed.

Why cartoons: total-variation regularisation is exact for piecewise-constant images, so these
are the natural ground truths for testing and demonstrating TV inversion (the paper's circle
experiment is one of them). Everything is a pure function of (kind, seed, size); nothing is
stored on disk. Values lie in [0, 1], background 0.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CARTOON_KINDS", "disc", "cartoon"]

CARTOON_KINDS = ("disc", "squares", "rectangles", "mixtures")


def _grid(size: int) -> tuple[np.ndarray, np.ndarray]:
    """(u, v) coordinates on linspace(-1, 1, size), u along columns, v along rows."""
    t = np.linspace(-1.0, 1.0, size)
    v, u = np.meshgrid(t, t, indexing="ij")
    return u, v


def disc(size: int = 64, radius: float = 0.5) -> np.ndarray:
    """The paper's ground truth: 1{u^2 + v^2 <= radius^2} on linspace(-1, 1, size)^2.

    With size 64 and radius 0.5 this has exactly 788 pixels (MATH.md §9.1); the comparison is
    done in float64 so the pixel count does not depend on rounding.
    """
    u, v = _grid(size)
    return (u * u + v * v <= radius * radius).astype(np.float32)


def _levels(rng: np.random.Generator, n: int) -> np.ndarray:
    """n distinct-looking grey levels in [0.25, 1] (kept away from the 0 background)."""
    return rng.uniform(0.25, 1.0, size=n)


def _squares(rng: np.random.Generator, size: int, square: bool) -> np.ndarray:
    img = np.zeros((size, size), dtype=np.float64)
    n = int(rng.integers(2, 5))
    for level in _levels(rng, n):
        h = int(rng.integers(max(2, size // 8), max(3, size // 2)))
        w = h if square else int(rng.integers(max(2, size // 8), max(3, size // 2)))
        r = int(rng.integers(0, size - h + 1))
        c = int(rng.integers(0, size - w + 1))
        img[r:r + h, c:c + w] = level  # later shapes occlude earlier ones: still piecewise constant
    return img


def _mixture(rng: np.random.Generator, size: int) -> np.ndarray:
    """Overlapping rectangles, discs, ellipses and triangles with random grey levels."""
    u, v = _grid(size)
    img = np.zeros((size, size), dtype=np.float64)
    n = int(rng.integers(3, 7))
    for level in _levels(rng, n):
        kind = int(rng.integers(0, 4))
        cu, cv = rng.uniform(-0.6, 0.6, size=2)
        if kind == 0:  # axis-aligned rectangle
            hu, hv = rng.uniform(0.1, 0.5, size=2)
            mask = (np.abs(u - cu) <= hu) & (np.abs(v - cv) <= hv)
        elif kind == 1:  # disc
            r = rng.uniform(0.1, 0.45)
            mask = (u - cu) ** 2 + (v - cv) ** 2 <= r * r
        elif kind == 2:  # rotated ellipse
            a, b = rng.uniform(0.1, 0.5, size=2)
            th = rng.uniform(0.0, np.pi)
            du, dv = u - cu, v - cv
            p = du * np.cos(th) + dv * np.sin(th)
            q = -du * np.sin(th) + dv * np.cos(th)
            mask = (p / a) ** 2 + (q / b) ** 2 <= 1.0
        else:  # triangle: intersection of three half-planes through random vertices
            pts = np.array([cu, cv]) + rng.uniform(-0.5, 0.5, size=(3, 2))
            mask = np.ones_like(u, dtype=bool)
            e1, e2 = pts[1] - pts[0], pts[2] - pts[0]
            sign = 1.0 if e1[0] * e2[1] - e1[1] * e2[0] >= 0 else -1.0  # orientation
            for i in range(3):
                a_, b_ = pts[i], pts[(i + 1) % 3]
                cross = (b_[0] - a_[0]) * (v - a_[1]) - (b_[1] - a_[1]) * (u - a_[0])
                mask &= sign * cross >= 0
        img[mask] = level
    return img


def cartoon(kind: str, seed: int = 0, size: int = 64) -> np.ndarray:
    """A (size, size) float32 cartoon image in [0, 1].

    ``kind``: ``"disc"`` (the paper's disc; ``seed`` is ignored), ``"squares"``,
    ``"rectangles"`` or ``"mixtures"``. The same (kind, seed, size) always gives the same image.
    """
    from lbi_engine.errors import InputError

    if kind not in CARTOON_KINDS:
        raise InputError(f"cartoon kind {kind!r} is unknown; choose one of {list(CARTOON_KINDS)}")
    if int(size) < 8:
        raise InputError(f"cartoon size {size} is too small; use at least 8 pixels")
    if int(seed) < 0:
        raise InputError(f"cartoon seed {seed} is negative; use an integer >= 0")
    if kind == "disc":
        return disc(int(size))
    # Seed the stream with the kind as well, so "squares" 3 and "mixtures" 3 are unrelated.
    rng = np.random.default_rng([int(seed), CARTOON_KINDS.index(kind)])
    if kind == "mixtures":
        img = _mixture(rng, int(size))
    else:
        img = _squares(rng, int(size), square=(kind == "squares"))
    return np.clip(img, 0.0, 1.0).astype(np.float32)
