"""Colour images in the window's views and exports: (3, H, W) from the engine is drawn as RGB
(pyqtgraph's ImageItem with (H, W, 3)), written as an RGB PNG, and the auxiliary-variable tiles
stay per channel.

Reference: the pixels themselves (the rendered QImage and the PNG read back with Pillow).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PIL import Image

from lbi_engine.api import tile_feature_maps
from lbi_gui.export import write_png8
from lbi_gui.widgets.image_grid import ImageGrid


def _colour(side: int = 6) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.random((3, side, side + 1)).astype(np.float32)


def test_the_image_grid_draws_colour(qtbot) -> None:
    import lbi_gui.window.main_window  # noqa: F401 - sets the window's image axis order

    grid = ImageGrid()
    qtbot.addWidget(grid)
    truth = _colour()
    grid.set_levels((0.0, 1.0))
    grid.set_truth(truth)
    grid.set_iterate(truth * 0.5)
    item = grid.items["truth"]
    assert item.image.shape == (6, 7, 3)
    item.render()
    pixels = pg.functions.ndarray_from_qimage(item.qimage)[..., :3]
    want = np.moveaxis(truth, 0, -1) * 255  # pyqtgraph maps levels with its own rounding
    assert pixels.shape == want.shape
    assert np.abs(pixels.astype(float) - want).max() <= 1.0
    # the error of a colour image is its magnitude per pixel, on a bar from 0
    magnitude = np.sqrt(np.sum(np.moveaxis(truth * 0.5 - truth, 0, -1) ** 2, axis=-1))
    np.testing.assert_allclose(grid.items["error"].image, magnitude, rtol=1e-6)
    assert grid.error_bar.levels() == (0.0, float(magnitude.max()))
    assert not grid.tools.lut.isEnabled()  # colour maps are for grey images
    grey = truth[0]
    grid.set_truth(grey)
    grid.set_iterate(grey * 0.5)
    assert grid.tools.lut.isEnabled() and grid.error_bar.levels()[0] < 0  # signed again


def test_png_export_of_a_colour_image_is_rgb(tmp_path) -> None:
    truth = _colour()
    write_png8(tmp_path / "x.png", truth, (0.0, 1.0))
    with Image.open(tmp_path / "x.png") as im:
        assert im.mode == "RGB"
        np.testing.assert_array_equal(np.asarray(im),
                                      np.rint(np.moveaxis(truth, 0, -1) * 255).astype(np.uint8))


def test_auxiliary_tiles_stay_per_channel() -> None:
    maps = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    grid = tile_feature_maps(maps)
    assert grid.ndim == 2  # one grey tile per channel, not a colour picture
    np.testing.assert_array_equal(grid[:4, :5], maps[0])
