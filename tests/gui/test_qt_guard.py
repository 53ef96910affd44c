"""Guards against known-bad Qt bindings (ENVIRONMENT.md) before any GUI test runs."""

from __future__ import annotations

import sys

from PySide6 import QtCore


def test_signal_emit_keeps_bool_refcount(qtbot) -> None:
    """PySide6 6.12.0 drops a reference to True on every emit and later aborts the process."""

    class S(QtCore.QObject):
        sig = QtCore.Signal(object)

    s = S()
    s.sig.connect(lambda v: None)
    before = sys.getrefcount(True)
    for _ in range(100):
        s.sig.emit(1)
    assert sys.getrefcount(True) - before > -50


def test_gui_modules_import_without_torch() -> None:
    """The window must appear before torch loads: no lbi_gui module may import it."""
    import subprocess

    code = ("import sys\n"
            "import lbi_gui.app, lbi_gui.window.main_window, lbi_gui.engine.worker\n"
            "import lbi_gui.window.controller\n"
            "import lbi_gui.model.session, lbi_gui.export\n"
            "bad = [m for m in ('torch', 'lbi_engine.api') if m in sys.modules]\n"
            "print(bad)\n"
            "sys.exit(1 if bad else 0)\n")
    env = {**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_window_shows_before_torch_loads() -> None:
    """In a fresh process: the window is on screen before torch; the engine loads after."""
    import os
    import subprocess

    code = ("import sys, time\n"
            "from PySide6 import QtWidgets\n"
            "app = QtWidgets.QApplication([])\n"
            "from lbi_gui.window.main_window import MainWindow\n"
            "w = MainWindow(restore_layout=False); w.show()\n"
            "shown_without_torch = w.isVisible() and 'torch' not in sys.modules\n"
            "end = time.time() + 120\n"
            "while w.view.info is None and time.time() < end:\n"
            "    app.processEvents(); time.sleep(0.01)\n"
            "ready = w.view.info is not None and 'torch' in sys.modules\n"
            "w.close()\n"
            "print('ok' if shown_without_torch and ready else 'bad', shown_without_torch)\n")
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=180)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stdout + out.stderr
