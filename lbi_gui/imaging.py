"""Display-space image helpers shared by views, thumbnails and exports (numpy + QImage).

Display images come from the engine as (H, W) or (C, H, W) arrays in [0, 1] (C = 1 or 3).
pyqtgraph is configured row-major, so a view wants (H, W) or (H, W, C).
"""

from __future__ import annotations

import numpy as np
from PySide6 import QtGui


def to_view(img: np.ndarray) -> np.ndarray:
    """(H, W) / (1, H, W) / (C, H, W) / (1, C, H, W) → (H, W) or (H, W, C) float32 for views."""
    a = np.asarray(img, dtype=np.float32)
    while a.ndim > 3 and a.shape[0] == 1:  # a leading batch dimension
        a = a[0]
    if a.ndim == 3 and a.shape[0] == 1:
        a = a[0]
    elif a.ndim == 3 and a.shape[0] in (3, 4) and a.shape[-1] not in (3, 4):
        a = np.moveaxis(a, 0, -1)
    if a.ndim == 1:  # a flat vector without a known image shape: show it as one row
        a = a[None, :]
    elif a.ndim > 3:
        a = a.reshape(-1, a.shape[-1])
    return np.ascontiguousarray(a)


def to_uint8(img: np.ndarray, levels: tuple[float, float] = (0.0, 1.0)) -> np.ndarray:
    """Map ``levels`` to 0..255 (clipped); what the window shows, as 8-bit."""
    lo, hi = float(levels[0]), float(levels[1])
    scale = 255.0 / (hi - lo) if hi > lo else 0.0
    return np.clip(np.rint((to_view(img) - lo) * scale), 0, 255).astype(np.uint8)


def to_uint16(img: np.ndarray, levels: tuple[float, float] = (0.0, 1.0)) -> np.ndarray:
    """Map ``levels`` to 0..65535 (clipped) for 16-bit PNGs."""
    lo, hi = float(levels[0]), float(levels[1])
    scale = 65535.0 / (hi - lo) if hi > lo else 0.0
    return np.clip(np.rint((to_view(img) - lo) * scale), 0, 65535).astype(np.uint16)


def to_qimage(img: np.ndarray, levels: tuple[float, float] = (0.0, 1.0)) -> QtGui.QImage:
    """An 8-bit QImage (grayscale or RGB) that owns its pixels."""
    a = to_uint8(img, levels)
    if a.ndim == 2:
        h, w = a.shape
        q = QtGui.QImage(a.data, w, h, a.strides[0], QtGui.QImage.Format.Format_Grayscale8)
    else:
        a = np.ascontiguousarray(a[..., :3])
        h, w, _ = a.shape
        q = QtGui.QImage(a.data, w, h, a.strides[0], QtGui.QImage.Format.Format_RGB888)
    return q.copy()  # detach from the numpy buffer


def error_map(estimate: np.ndarray, truth: np.ndarray) -> np.ndarray | None:
    """Signed error estimate − truth in view layout, or None when the shapes differ."""
    a, b = to_view(estimate), to_view(truth)
    if a.shape != b.shape:
        return None
    return a - b
