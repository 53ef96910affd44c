"""GUI test set-up: offscreen Qt, throw-away QSettings, window fixtures.

QT_QPA_PLATFORM must be set before Qt loads, so it is set at import of this conftest
(pytest imports it before any test module imports PySide6).
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from PySide6 import QtCore


@pytest.fixture(scope="session", autouse=True)
def _temporary_qsettings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every QSettings in the tests lives in a temporary folder, never the user's."""
    folder = tmp_path_factory.mktemp("qsettings")
    for fmt in (QtCore.QSettings.Format.IniFormat, QtCore.QSettings.Format.NativeFormat):
        QtCore.QSettings.setPath(fmt, QtCore.QSettings.Scope.UserScope, str(folder))
    yield


@pytest.fixture(autouse=True)
def _fresh_qsettings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each test starts with empty settings: a window size, dock layout or recent file that
    one test remembers never leaks into the next."""
    folder = tmp_path_factory.mktemp("qsettings_test")
    for fmt in (QtCore.QSettings.Format.IniFormat, QtCore.QSettings.Format.NativeFormat):
        QtCore.QSettings.setPath(fmt, QtCore.QSettings.Scope.UserScope, str(folder))
    yield


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Switch the GUI to the numpy fake engine (optionally slowed down)."""
    from lbi_gui import engine
    from tests.gui.fake_engine import make_fake_engine

    def use(delay: float = 0.0) -> None:
        fake = make_fake_engine(delay)
        monkeypatch.setattr(engine, "ENGINE_FACTORY", lambda: fake)

    yield use
    _forget_bundles()


def _forget_bundles() -> None:
    """Networks the fake engine 'loaded' are cached by name (run_driver); a later test with
    the real engine must not be handed them."""
    from lbi_gui.engine import run_driver

    with run_driver._BUNDLES_LOCK:
        run_driver._BUNDLES.clear()


@pytest.fixture
def make_window(qtbot: Any) -> Iterator[Callable[..., Any]]:
    """Create MainWindows that are booted and prepared; all are closed (threads joined)."""
    from lbi_gui.window.main_window import MainWindow

    windows: list[MainWindow] = []

    def make(request: dict | None = None, *, wait: bool = True, **kw: Any) -> MainWindow:
        kw.setdefault("restore_layout", False)
        win = MainWindow(request, **kw)
        qtbot.addWidget(win)
        win.show()
        windows.append(win)
        if wait:
            wait_ready(qtbot, win)
        return win

    yield make
    for win in windows:
        win.close()
        assert win.controller.thread.wait(10000)
        assert win.controller.thread.isFinished()


@pytest.fixture
def two_runs(qtbot: Any, fake_engine: Callable[..., None], make_window: Callable[..., Any]) -> Any:
    """A window (fake engine) with two finished runs: #1 joint α 0.01, #2 landweber α 0.02."""
    fake_engine()
    win = make_window({"network": "fake-net", "max_iter": 20, "alpha": 0.01, "method": "joint"})
    win.runner.run()
    wait_idle(qtbot, win)
    win.params.set_request({**win.params.current_request(), "method": "landweber", "alpha": 0.02})
    win.params.flush_changes()
    win.runner.run()
    qtbot.waitUntil(lambda: len(win.run_table.runs) == 2, timeout=20000)
    wait_idle(qtbot, win)
    return win


def wait_ready(qtbot: Any, win: Any, timeout: int = 60000) -> None:
    """Until the engine is loaded and the problem on screen is prepared."""
    qtbot.waitUntil(lambda: win.view.info is not None and win.controller.state == "idle",
                    timeout=timeout)


def wait_idle(qtbot: Any, win: Any, timeout: int = 60000) -> None:
    """Until no run is going."""
    qtbot.waitUntil(lambda: not win.controller.running, timeout=timeout)


def wait_iterations(qtbot: Any, win: Any, k: int, timeout: int = 60000) -> None:
    """Until the running solve has reported iteration ``k`` or later."""
    qtbot.waitUntil(lambda: win.controller.curves.last_iteration >= k, timeout=timeout)


@pytest.fixture
def image_grid(qtbot: Any) -> Any:
    """A shown ImageGrid (900×300) without a window."""
    from lbi_gui.widgets.image_grid import ImageGrid

    grid = ImageGrid()
    qtbot.addWidget(grid)
    grid.resize(900, 300)
    grid.show()
    return grid
