"""Image and array files of a run: float32 ``.npy`` and display PNGs, written atomically.

Part of the one results writer (:mod:`lbi_engine.results.exports` re-exports these), kept apart
because turning any array a network takes into a picture is its own concern.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import numpy as np

from lbi_engine.io import atomic_save_npy, atomic_write_bytes, safe_output_path


def save_npy(path: str | Path, array: Any, overwrite: bool = False) -> Path:
    """float32 ``.npy`` without pickles, written atomically."""
    target = safe_output_path(path, overwrite)
    atomic_save_npy(target, np.asarray(to_numpy(array), dtype=np.float32))
    return target


def to_uint8_image(
    array: Any, vmin: float | None = 0.0, vmax: float | None = 1.0
) -> np.ndarray:
    """A display image as uint8: (H, W) grey, or (H, W, 3|4) colour.

    Accepts (H, W), (1, H, W), (3, H, W), (H, W, 3), flat squares and leading dims of 1. Values are
    clipped to [vmin, vmax] (None: the array's own min/max), NaN shows as black. Other
    channel counts are tiled side by side, because a PNG has no 8-channel mode.
    """
    a = np.asarray(to_numpy(array), dtype=np.float64)
    while a.ndim > 3 and a.shape[0] == 1:  # batch dims of one sample
        a = a[0]
    if a.ndim == 3:  # the engine's convention is channel-first (C, H, W)
        if a.shape[0] == 1:
            a = a[0]
        elif a.shape[0] in (3, 4):
            a = np.moveaxis(a, 0, -1)
        elif a.shape[-1] not in (3, 4):
            a = np.concatenate(list(a), axis=1)  # C feature maps side by side
    elif a.ndim == 1:
        side = math.isqrt(a.size)
        a = a.reshape(side, side) if side * side == a.size else a[None, :]
    if a.ndim > 3:
        raise ValueError(f"cannot show an array of shape {a.shape} as an image")
    finite = a[np.isfinite(a)]
    lo = float(finite.min()) if vmin is None and finite.size else (vmin or 0.0)
    hi = float(finite.max()) if vmax is None and finite.size else (1.0 if vmax is None else vmax)
    span = hi - lo if hi > lo else 1.0
    scaled = np.nan_to_num((a - lo) / span, nan=0.0, posinf=1.0, neginf=0.0)
    return np.round(np.clip(scaled, 0.0, 1.0) * 255.0).astype(np.uint8)


def save_png(
    path: str | Path,
    array: Any,
    overwrite: bool = False,
    *,
    vmin: float | None = 0.0,
    vmax: float | None = 1.0,
    scale: int = 1,
) -> Path:
    """An image array (display range [vmin, vmax]) as PNG, atomically, via Pillow.

    ``scale`` > 1 enlarges by pixel repetition (nearest neighbour), so 28x28 digits stay
    sharp when viewed; the default keeps one PNG pixel per array entry.
    """
    from PIL import Image

    target = safe_output_path(path, overwrite)
    pixels = to_uint8_image(array, vmin, vmax)
    if scale > 1:
        pixels = np.repeat(np.repeat(pixels, scale, axis=0), scale, axis=1)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    atomic_write_bytes(target, buffer.getvalue())
    return target


def to_numpy(value: Any) -> Any:
    if value is None:
        return None
    if hasattr(value, "detach"):
        return value.detach().to("cpu").numpy()
    return value
