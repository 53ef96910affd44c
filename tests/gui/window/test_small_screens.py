"""The window on small screens: opens inside the available area, remembers the user's size,
every control reachable at 1280×720 and usable at 1024×700."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from PySide6 import QtCore, QtWidgets

from lbi_gui.window import layout
from lbi_gui.window.layout import FRAME_MARGIN, fit_geometry
from lbi_gui.window.main_window import MainWindow

SCREENS = [(1280, 720), (1024, 700), (1920, 1080)]
INPUTS = (QtWidgets.QAbstractSpinBox, QtWidgets.QComboBox, QtWidgets.QLineEdit,
          QtWidgets.QAbstractButton, QtWidgets.QAbstractSlider)


def _settle(qtbot: Any, ms: int = 60) -> None:
    QtWidgets.QApplication.processEvents()
    qtbot.wait(ms)
    QtWidgets.QApplication.processEvents()


@pytest.mark.parametrize("screen", SCREENS)
def test_fit_geometry_inside_the_available_area(screen: tuple[int, int]) -> None:
    avail = QtCore.QRect(0, 24, screen[0], screen[1] - 24)  # a top panel takes 24 pixels
    for wanted in (None, QtCore.QRect(-300, -50, 2500, 1600), QtCore.QRect(100, 100, 900, 600)):
        g = fit_geometry(avail, wanted)
        framed = g.adjusted(-FRAME_MARGIN[0] // 2, -FRAME_MARGIN[1] + FRAME_MARGIN[0] // 2,
                            FRAME_MARGIN[0] // 2, FRAME_MARGIN[0] // 2)
        assert avail.contains(framed), (screen, wanted, g)
    small = QtCore.QRect(100, 100, 900, 600)
    assert fit_geometry(avail, small).size() == small.size()  # a size that fits is kept


@pytest.mark.parametrize("screen", [(1280, 720), (1024, 700)])
def test_window_opens_inside_a_small_screen(qtbot, fake_engine, monkeypatch, screen) -> None:
    fake_engine()
    monkeypatch.setattr(layout, "available_area",
                        lambda _widget: QtCore.QRect(0, 0, screen[0], screen[1]))
    win = MainWindow(restore_layout=False)
    qtbot.addWidget(win)
    win.show()
    _settle(qtbot)
    g = win.geometry()
    assert g.right() < screen[0] and g.bottom() < screen[1], g
    assert g.width() >= screen[0] - 2 * FRAME_MARGIN[0]  # uses the screen, not a corner
    win.close()


def test_window_remembers_the_users_size(qtbot, fake_engine, monkeypatch) -> None:
    fake_engine()
    monkeypatch.setattr(layout, "available_area", lambda _w: QtCore.QRect(0, 0, 1920, 1080))
    first = MainWindow(restore_layout=True)
    qtbot.addWidget(first)
    first.show()
    first.resize(1100, 670)  # above the minimum height (readable image views)
    _settle(qtbot)
    first.close()
    second = MainWindow(restore_layout=True)
    qtbot.addWidget(second)
    second.show()
    _settle(qtbot)
    assert (second.width(), second.height()) == (1100, 670)
    second.close()


def _reachable(win: QtWidgets.QMainWindow, widget: QtWidgets.QWidget) -> bool:
    """Inside the window, or inside a scroll area's viewport after scrolling to it."""
    area = widget.parentWidget()
    while area is not None and not isinstance(area, QtWidgets.QScrollArea):
        area = area.parentWidget()
    frame = win.rect()
    if area is not None:
        area.ensureWidgetVisible(widget, 0, 0)
        QtWidgets.QApplication.processEvents()
        viewport = area.viewport()
        port = QtCore.QRect(viewport.mapTo(win, QtCore.QPoint(0, 0)), viewport.size())
        if not frame.contains(port):
            return False
        frame = port
    top_left = widget.mapTo(win, QtCore.QPoint(0, 0))
    rect = QtCore.QRect(top_left, widget.size())
    visible = rect.intersected(frame)
    return visible.width() >= min(rect.width(), 12) and visible.height() >= min(rect.height(), 8)


@pytest.mark.parametrize(("screen", "method"), [((1280, 720), "auto"), ((1024, 700), "auto"),
                                                ((1280, 720), "layerwise")])
def test_every_parameter_control_is_reachable(qtbot, fake_engine, make_window, screen,
                                              method) -> None:
    """Layer-wise shows more: the feature prior's row and what it needs (no prior here)."""
    fake_engine()
    win = make_window({"network": "fake-net", "method": method})
    assert win.solver_panel.prior_hint.isVisibleTo(win) == (method == "layerwise")
    size = (screen[0] - FRAME_MARGIN[0], screen[1] - FRAME_MARGIN[1])
    win.resize(*size)
    _settle(qtbot)
    assert (win.width(), win.height()) == size  # the window can be that small
    checked = 0
    for dock in win.docks.values():
        dock.show()
        dock.raise_()
        _settle(qtbot, 20)
        for widget in dock.widget().findChildren(QtWidgets.QWidget):
            if not isinstance(widget, INPUTS) or not widget.isVisibleTo(win):
                continue
            if isinstance(widget, QtWidgets.QScrollBar) or widget.inherits("QTableCornerButton"):
                continue
            assert _reachable(win, widget), (screen, dock.windowTitle(), widget.objectName(),
                                             type(widget).__name__,
                                             getattr(widget, "text", lambda: "")())
            checked += 1
    assert checked > 20


@pytest.mark.parametrize("screen", [(1280, 720), (1024, 700)])
def test_titles_never_overprint_and_plots_are_not_cut(qtbot, fake_engine, make_window,
                                                      screen) -> None:
    fake_engine()
    win = make_window()
    win.resize(screen[0] - FRAME_MARGIN[0], screen[1] - FRAME_MARGIN[1])
    _settle(qtbot, 150)
    grid = win.image_grid
    boxes = [p.titleLabel.item.mapRectToScene(p.titleLabel.item.boundingRect())
             for p in grid.plots.values()]
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            assert not boxes[i].intersects(boxes[j]), (i, j, boxes[i], boxes[j])
    view = grid.glw.viewport().rect()
    for key, plot in grid.plots.items():  # every image view whole and of a usable size
        box = plot.vb.sceneBoundingRect()
        assert box.left() >= -1 and box.right() <= view.width() + 1, (key, box, view)
        assert box.bottom() <= view.height() + 1 and box.width() >= 40, (key, box, view)
    win.docks["curves"].raise_()  # a tab of the inputs' column
    _settle(qtbot, 150)
    curves = win.curves
    width = curves.glw.viewport().width()
    for key, plot in curves.plots.items():
        assert plot.sceneBoundingRect().right() <= width + 1, (key, plot.sceneBoundingRect())
        assert plot.sceneBoundingRect().height() >= 100, key  # readable, scrolls if needed


def _fills(grid: Any, shape: tuple[int, int]) -> bool:
    """The whole image is in view and fills the view in one direction (within padding)."""
    (x0, x1), (y0, y1) = grid.plots["truth"].vb.viewRange()
    inside = x0 <= 0 and y0 <= 0 and x1 >= shape[1] and y1 >= shape[0]
    fill = max(shape[1] / (x1 - x0), shape[0] / (y1 - y0))
    return inside and fill > 0.9


def test_image_views_refit_on_resize_and_fit_view(qtbot, fake_engine, make_window) -> None:
    fake_engine()
    win = make_window()
    _settle(qtbot, 100)
    grid = win.image_grid
    assert _fills(grid, (16, 16))
    win.resize(1800, 560)
    _settle(qtbot, 150)
    assert _fills(grid, (16, 16))
    grid.plots["iterate"].vb.scaleBy((0.3, 0.3))  # a zoom into a corner ...
    grid.plots["iterate"].vb.sigRangeChangedManually.emit([True, True])
    win.resize(1200, 700)
    _settle(qtbot, 150)
    assert grid.user_zoomed and not _fills(grid, (16, 16))  # ... is kept over a resize
    win.actions_.fit_view.trigger()
    _settle(qtbot)
    assert _fills(grid, (16, 16)) and not grid.user_zoomed


def test_measured_y_without_truth_is_drawn_whole(qtbot, image_grid) -> None:
    grid = image_grid
    grid.set_truth(np.ones((16, 16)))
    _settle(qtbot)
    grid.set_truth(None)  # a measured y: no ground truth, and a larger network input
    grid.set_iterate(np.random.default_rng(0).random((28, 40)), 5)
    _settle(qtbot)
    assert _fills(grid, (28, 40))


def test_pixel_readout_on_hover(qtbot, image_grid) -> None:
    """The readout gives every image's value at the pixel under the mouse, from any view."""
    grid = image_grid
    img = np.arange(16 * 16, dtype=np.float32).reshape(16, 16) / 256
    grid.set_truth(img)
    _settle(qtbot)
    vb = grid.plots["truth"].vb
    grid._hover(vb.mapViewToScene(QtCore.QPointF(5.5, 3.5)))  # column 5, row 3
    assert grid.readout.text() == f"row 3, col 5:  x† {img[3, 5]:.4g}"
    iterate = img[::-1].copy()
    grid.set_iterate(iterate, 7)
    _settle(qtbot)
    grid._hover(grid.plots["iterate"].vb.mapViewToScene(QtCore.QPointF(5.5, 3.5)))
    error = iterate[3, 5] - img[3, 5]
    assert grid.readout.text() == (f"row 3, col 5:  x† {img[3, 5]:.4g}  x {iterate[3, 5]:.4g}"
                                   f"  x − x† {error:.4g}")
    grid._hover(QtCore.QPointF(-50, -50))
    assert grid.readout.text().strip() == ""


def test_curves_share_one_x_range_in_every_layout(qtbot) -> None:
    from lbi_gui.model.runs import CurveStore
    from lbi_gui.widgets.curves import CurvesPanel

    panel = CurvesPanel()
    qtbot.addWidget(panel)
    panel.show()
    store = CurveStore()
    store.extend([{"iteration": k, "objective": 0.99 ** k, "reg_term": 0.1,
                   "discrepancy": 0.1 + 0.99 ** k, "primal_residual": 0.98 ** k,
                   "dual_residual": 0.97 ** k, "psnr": 20.0, "ssim": 0.5, "elapsed": k * 1e-3,
                   "bregman": [0.99 ** k]} for k in range(300)])
    for width in (1500, 520, 260):  # three, two and one plot(s) per row
        panel.resize(width, 400)
        _settle(qtbot, 80)
        panel.update_curves(store)
        _settle(qtbot, 80)
        ranges = [tuple(np.round(p.vb.viewRange()[0], 3)) for p in panel.plots.values()]
        assert len(set(ranges)) == 1, (width, ranges)
        widths = {round(p.vb.sceneBoundingRect().width()) for p in panel.plots.values()}
        assert max(widths) - min(widths) <= 1, (width, widths)


def test_curve_plots_fit_at_every_width_with_a_scroll_bar(qtbot) -> None:
    from lbi_gui.widgets.curves import CurvesPanel

    panel = CurvesPanel()
    qtbot.addWidget(panel)
    panel.show()
    for width in range(250, 800, 15):  # short panel: the vertical scroll bar is there
        panel.resize(width, 260)
        _settle(qtbot, 30)
        view = panel.glw.viewport().width()
        for key, plot in panel.plots.items():
            assert plot.sceneBoundingRect().right() <= view + 1, (width, key, view)
