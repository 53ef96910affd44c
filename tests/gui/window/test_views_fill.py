"""At 1280×720 the images are big enough to judge: a 64×64 colour reconstruction is drawn
at ≥ 3× with the default layout, Fit enlarges, Hist never resizes the window, and the
auxiliary strip, the runs table and the curves keep usable sizes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from PySide6 import QtCore, QtWidgets

from lbi_gui.widgets.aux_strip import AUX_MIN_HEIGHT
from lbi_gui.widgets.image_grid import ImageGrid
from lbi_gui.window import layout
from lbi_gui.window.main_window import MainWindow
from tests.gui.conftest import wait_ready


def _settle(qtbot: Any, ms: int = 150) -> None:
    QtWidgets.QApplication.processEvents()
    qtbot.wait(ms)
    QtWidgets.QApplication.processEvents()


def drawn_side(grid: ImageGrid, key: str, pixels: int = 64) -> float:
    """Screen pixels an image of ``pixels`` columns takes in view ``key`` (zoom × size)."""
    vb = grid.plots[key].vb
    return pixels * vb.width() / vb.viewRect().width()


@pytest.fixture
def window_1280(qtbot, fake_engine, monkeypatch) -> MainWindow:
    fake_engine()
    monkeypatch.setattr(layout, "available_area", lambda _w: QtCore.QRect(0, 0, 1280, 720))
    win = MainWindow({"network": "fake-net"}, restore_layout=False)
    qtbot.addWidget(win)
    win.show()
    wait_ready(qtbot, win)
    rgb = np.random.default_rng(0).random((3, 64, 64)).astype(np.float32)
    win.image_grid.set_truth(rgb)
    win.image_grid.set_iterate(rgb * 0.9, 750, 18.25)
    _settle(qtbot)
    yield win
    win.close()


def test_a_64_pixel_colour_reconstruction_is_drawn_at_three_times(qtbot, window_1280) -> None:
    win, grid = window_1280, window_1280.image_grid
    assert win.width() <= 1280 and win.height() <= 720
    for key in ("truth", "iterate", "error"):
        assert drawn_side(grid, key) >= 192, (key, drawn_side(grid, key), grid.view_sizes())
    grid.plots["iterate"].vb.scaleBy((3.0, 3.0))  # the user zooms out: the image shrinks
    _settle(qtbot)
    assert drawn_side(grid, "iterate") < 100
    grid.fit_view()
    _settle(qtbot)
    assert drawn_side(grid, "iterate") >= 192  # Fit enlarges to the view


def test_hist_never_resizes_the_window(qtbot, window_1280) -> None:
    win, grid = window_1280, window_1280.image_grid
    size, views = win.size(), grid.view_sizes()
    grid.tools.hist_button.setChecked(True)
    _settle(qtbot)
    assert grid.tools.hist.isVisible() and win.size() == size
    assert drawn_side(grid, "iterate") >= 100  # the views give the histogram its room
    grid.tools.hist_button.setChecked(False)
    _settle(qtbot)
    assert win.size() == size
    after = grid.view_sizes()
    for key, (w, h) in views.items():  # and take it back
        assert after[key] == pytest.approx((w, h), abs=2), key


def test_aux_strip_runs_table_and_curves_keep_usable_sizes(qtbot, window_1280) -> None:
    win = window_1280
    maps = np.random.default_rng(1).random((24, 96)).astype(np.float32)
    win.aux_strip.set_aux([maps, maps])
    _settle(qtbot)
    assert win.aux_strip.height() >= AUX_MIN_HEIGHT
    assert all(p.vb.height() >= 40 for p in win.aux_strip.plots[:2])  # maps, not lines
    assert drawn_side(win.image_grid, "iterate") >= 150
    win.docks["runs"].raise_()
    _settle(qtbot)
    assert win.run_table.table.height() >= 150  # six rows, not two
    win.docks["curves"].raise_()
    _settle(qtbot)
    for key, plot in win.curves.plots.items():
        box = plot.vb.sceneBoundingRect()
        assert box.width() >= 150 and box.height() >= 80, (key, box)


def test_a_run_raises_the_curves_over_the_inputs(qtbot, window_1280) -> None:
    win = window_1280
    assert win.docks["curves"].visibleRegion().isEmpty()  # the data tab is up at start
    win.runner.run()
    qtbot.waitUntil(lambda: not win.docks["curves"].visibleRegion().isEmpty(), timeout=5000)
