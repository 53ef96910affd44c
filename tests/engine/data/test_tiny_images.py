"""An image too small to hold a picture is refused when it would be enlarged to the
network's input (a 3×3 PNG resized to 32×32 is a blur of nine values), in one line naming
its size, the minimum and the network's input; at its own size it is read as it is."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from lbi_engine.data import read_image
from lbi_engine.data._file_checks import MIN_UPSCALED_SIDE
from lbi_engine.errors import DataFileError


def _png(path, side: int, width: int | None = None) -> str:
    rgb = np.random.default_rng(side).integers(0, 255, (side, width or side, 3), np.uint8)
    Image.fromarray(rgb, "RGB").save(path)
    return str(path)


@pytest.mark.parametrize(("height", "width"), [(1, 1), (3, 3), (2, 40), (40, 7)])
def test_enlarging_a_tiny_image_is_refused(tmp_path, height, width):
    path = _png(tmp_path / "tiny.png", height, width)
    with pytest.raises(DataFileError) as info:
        read_image(path, size=(32, 32), channels=3)
    msg = str(info.value)
    assert "tiny.png" in msg and f"{width} x {height} pixels" in msg
    assert f"at least {MIN_UPSCALED_SIDE} pixels on each side" in msg and "32 x 32" in msg
    assert "\n" not in msg


def test_a_small_image_at_its_own_size_or_shrunk_is_read(tmp_path):
    three = _png(tmp_path / "three.png", 3)
    assert read_image(three, channels=3).shape == (1, 3, 3, 3)  # no resize: as it is
    assert read_image(three, size=(3, 3), channels=3).shape == (1, 3, 3, 3)
    assert read_image(three, size=(2, 2), channels=3).shape == (1, 3, 2, 2)  # shrinking
    eight = _png(tmp_path / "eight.png", MIN_UPSCALED_SIDE)
    out = read_image(eight, size=(32, 32), channels=3)
    assert out.shape == (1, 3, 32, 32) and float(out.std()) > 0.05  # a picture, not flat
