"""Arrays to views (lbi_gui.imaging): layouts to (H, W) or (H, W, 3), error maps, levels."""

from __future__ import annotations

import numpy as np

from lbi_gui.imaging import error_map, to_uint8, to_view


def test_to_view_layouts() -> None:
    assert to_view(np.zeros((28, 28))).shape == (28, 28)
    assert to_view(np.zeros((1, 28, 28))).shape == (28, 28)
    assert to_view(np.zeros((1, 1, 28, 28))).shape == (28, 28)
    assert to_view(np.zeros((3, 8, 9))).shape == (8, 9, 3)
    assert to_view(np.zeros(10)).shape == (1, 10)
    assert error_map(np.ones((1, 4, 4)), np.zeros((4, 4))).sum() == 16
    assert error_map(np.ones((4, 4)), np.zeros((5, 5))) is None


def test_uint8_uses_levels() -> None:
    img = np.array([[-1.0, 0.0, 0.25, 0.5, 2.0]])
    assert to_uint8(img, (0.0, 0.5)).tolist() == [[0, 0, 128, 255, 255]]
