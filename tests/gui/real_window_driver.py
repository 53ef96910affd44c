"""Drives the real application window as a person would (run by test_real_window.py under
Xvfb with the xcb platform): network switch with the keyboard in the combo box, a typed
iteration budget, Ctrl+R typed into that field, then Ctrl+E and the export dialog filled in
and confirmed by clicks. Prints one JSON line with what it saw; exit 0 on success.

``python -m tests.gui.real_window_driver OUT_DIR``
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtWidgets
from PySide6.QtTest import QTest

Key = QtCore.Qt.Key
CTRL = QtCore.Qt.KeyboardModifier.ControlModifier


def wait_until(cond: Any, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise TimeoutError(f"timed out waiting for {cond.__doc__ or cond}")
        QtWidgets.QApplication.processEvents(QtCore.QEventLoop.ProcessEventsFlag.AllEvents, 50)
        time.sleep(0.01)


def main(out_dir: str) -> int:
    app = QtWidgets.QApplication(sys.argv[:1])
    from lbi_gui.window.main_window import MainWindow

    win = MainWindow({"max_iter": 1500}, restore_layout=False)
    win.show()
    win.raise_()
    win.activateWindow()
    seen: dict[str, Any] = {"platform": app.platformName(),
                            "truth_at_show": win.image_grid.truth is not None}
    wait_until(lambda: win.info is not None and win.controller.state == "idle")
    seen["first_network"] = win.info.network_name

    # 1. network switch: the Network tab, the combo box, arrow keys, Enter
    win.docks["network"].raise_()
    combo = win.network_panel.combo
    wait_until(lambda: combo.isVisible())
    QTest.mouseClick(combo, QtCore.Qt.MouseButton.LeftButton)
    wait_until(lambda: combo.view().isVisible())
    target = combo.findData("mnist-perceptron-ae")
    for _ in range(abs(target - combo.currentIndex())):
        QTest.keyClick(combo.view(), Key.Key_Down if target > combo.currentIndex() else Key.Key_Up)
    QTest.keyClick(combo.view(), Key.Key_Return)
    wait_until(lambda: win.info.network_name == "mnist-perceptron-ae"
               and win.controller.state == "idle")
    seen["network"] = win.info.network_name

    # 2. a budget typed into the field, Ctrl+R pressed there
    field = win.solver_panel.max_iter
    win.docks["parameters"].widget().ensureWidgetVisible(field)
    QTest.mouseDClick(field.lineEdit(), QtCore.Qt.MouseButton.LeftButton)
    QTest.keyClick(field, Key.Key_A, CTRL)
    QTest.keyClicks(field, "80")
    QTest.keyClick(field, Key.Key_R, CTRL)
    wait_until(lambda: len(win.run_table.runs) == 1)
    run = win.run_table.runs[-1]
    seen.update(iterations=run.iterations, method=run.metrics.get("method_run"),
                run_network=run.request["network"], psnr=run.metrics.get("psnr"))

    # 3. Ctrl+E, the dialog's folder typed in, Export clicked
    def fill_dialog() -> None:
        dialog = QtWidgets.QApplication.activeModalWidget()
        if dialog is None:
            QtCore.QTimer.singleShot(100, fill_dialog)
            return
        dialog.folder.selectAll()
        QTest.keyClicks(dialog.folder, out_dir)
        QTest.mouseClick(dialog.buttons_ok(), QtCore.Qt.MouseButton.LeftButton)

    QtCore.QTimer.singleShot(200, fill_dialog)
    QTest.keyClick(win, Key.Key_E, CTRL)
    method = run.metrics.get("method_run") or run.request["method"]
    wait_until(lambda: (Path(out_dir) / f"lbi_run{run.run_id}_{method}_result" / "result.json")
               .exists())
    seen["files"] = sorted(p.name for p in Path(out_dir).iterdir())
    print(json.dumps(seen), flush=True)
    win.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
