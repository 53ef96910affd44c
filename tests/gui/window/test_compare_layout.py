"""Comparing two runs keeps every image readable at 1280×720; View → Reset layout restores
the default docks; a layout with squeezed images is never remembered."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6 import QtCore, QtWidgets

from lbi_gui.settings import settings
from lbi_gui.widgets.image_grid import MIN_VIEW
from lbi_gui.widgets.run_table import MIN_COMPARE_VIEW
from lbi_gui.window import layout
from lbi_gui.window.main_window import MainWindow
from tests.gui.conftest import wait_idle, wait_ready


def _settle(qtbot: Any, ms: int = 200) -> None:
    QtWidgets.QApplication.processEvents()
    qtbot.wait(ms)
    QtWidgets.QApplication.processEvents()


def _two_runs(qtbot: Any, fake_engine: Any, monkeypatch: Any, screen: tuple[int, int],
              restore: bool = False) -> MainWindow:
    fake_engine()
    monkeypatch.setattr(layout, "available_area",
                        lambda _widget: QtCore.QRect(0, 0, screen[0], screen[1]))
    win = MainWindow({"network": "fake-net", "max_iter": 20, "alpha": 0.01, "method": "joint"},
                     restore_layout=restore)
    qtbot.addWidget(win)
    win.show()
    wait_ready(qtbot, win)
    for method, alpha in (("joint", 0.01), ("landweber", 0.02)):
        win.params.set_request({**win.params.current_request(), "method": method, "alpha": alpha})
        win.params.flush_changes()
        win.runner.run()
        wait_idle(qtbot, win)
        qtbot.waitUntil(lambda: not win.controller.running)
    qtbot.waitUntil(lambda: len(win.run_table.runs) == 2, timeout=20000)
    win.docks["runs"].raise_()
    win.run_table.select_ids([r.run_id for r in win.run_table.runs])
    _settle(qtbot)
    return win


def _compare_sizes(win: MainWindow) -> list[tuple[float, float]]:
    return [(p.vb.width(), p.vb.height()) for p in win.run_table.compare_view.plots]


@pytest.mark.parametrize("screen", [(1280, 720), (1920, 1080)])
def test_comparing_two_runs_keeps_the_images_readable(qtbot, fake_engine, monkeypatch,
                                                      screen) -> None:
    win = _two_runs(qtbot, fake_engine, monkeypatch, screen)
    assert win.run_table.compare_view.shown is not None
    assert win.height() <= screen[1] and win.width() <= screen[0]
    for key, size in win.image_grid.view_sizes().items():
        assert min(size) >= MIN_VIEW * 0.8, (key, size)  # they were 5 px at 1280×720
    for size in _compare_sizes(win):
        assert min(size) >= MIN_COMPARE_VIEW * 0.9, size
    assert win.image_grid.readable()
    win.close()


def test_reset_layout_restores_the_default_docks(qtbot, fake_engine, monkeypatch) -> None:
    win = _two_runs(qtbot, fake_engine, monkeypatch, (1280, 720))
    runs = win.docks["runs"]
    win.removeDockWidget(runs)  # the user drags Runs out and floats it
    win.addDockWidget(QtCore.Qt.DockWidgetArea.LeftDockWidgetArea, runs)
    runs.setFloating(True)
    _settle(qtbot)
    win.actions_.reset_layout.trigger()
    _settle(qtbot)
    assert not runs.isFloating()
    assert win.dockWidgetArea(runs) == QtCore.Qt.DockWidgetArea.LeftDockWidgetArea
    assert win.image_grid.readable()
    assert win.docks["curves"].height() >= 200
    win.close()


def test_a_squeezed_layout_is_not_remembered(qtbot, fake_engine, monkeypatch) -> None:
    win = _two_runs(qtbot, fake_engine, monkeypatch, (1280, 720))
    win.save_layout()
    assert settings().value("window/state") is not None  # a readable layout is remembered
    monkeypatch.setattr(win.image_grid, "readable", lambda: False)
    win.save_layout()
    assert settings().value("window/state") is None
    win.close()
