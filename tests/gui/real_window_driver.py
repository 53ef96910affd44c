"""Drives the real application window as a person would (run by test_real_window.py under
Xvfb with the xcb platform): network switch with the keyboard in the combo box, a typed
iteration budget, Ctrl+R typed into that field, then Ctrl+E and the export dialog filled in
and confirmed by clicks; then layer-wise at a typed α (Ctrl+L, Ctrl+R), two runs compared by
Ctrl+clicks in the Runs table, and Open session over an unsaved run (the question answered by
clicks). Prints one JSON line with what it saw; exit 0 on success.

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
    wait_until(lambda: win.view.info is not None and win.controller.state == "idle")
    seen["first_network"] = win.view.info.network_name

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
    wait_until(lambda: win.view.info.network_name == "mnist-perceptron-ae"
               and win.controller.state == "idle")
    seen["network"] = win.view.info.network_name

    # 2. a budget typed into the field, Ctrl+R pressed there
    field = win.solver_panel.max_iter
    win.docks["parameters"].widget().ensureWidgetVisible(field)
    QTest.mouseDClick(field.lineEdit(), QtCore.Qt.MouseButton.LeftButton)
    QTest.keyClick(field, Key.Key_A, CTRL)
    QTest.keyClicks(field, "80")
    QTest.keyClick(field, Key.Key_R, CTRL)
    wait_until(lambda: len(win.run_table.runs) == 1)
    run = win.run_table.runs[-1]
    seen.update(iterations=run.iterations, method=run.metrics.method_run,
                run_network=run.request["network"], psnr=run.metrics.psnr)

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
    method = run.metrics.method_run or run.request["method"]
    wait_until(lambda: (Path(out_dir) / f"lbi_run{run.run_id}_{method}_result" / "result.json")
               .exists())
    seen["files"] = sorted(p.name for p in Path(out_dir).iterdir())
    session = str(Path(out_dir) / "study.lbisession")
    assert win.files.save_session_to(session)

    # 4. layer-wise at a typed α: back to the CNN, α typed (Auto switches off), Ctrl+L, Ctrl+R
    win.network_panel.set_values({"network": "mnist-cnn-ae"})
    win.params.panel_changed("network")
    win.params.flush_changes()
    wait_until(lambda: win.view.info.network_name == "mnist-cnn-ae"
               and win.controller.state == "idle")
    type_into(win, win.solver_panel.max_iter, "60")
    type_into(win, win.reg_panel.alpha.spin, "0.01")
    focus = QtWidgets.QApplication.focusWidget() or win
    QTest.keyClick(focus, Key.Key_L, CTRL)  # typed where the α was typed, as a person would
    settle(0.3)
    QTest.keyClick(QtWidgets.QApplication.focusWidget() or win, Key.Key_R, CTRL)
    from lbi_gui.dialogs import messages

    def state() -> str:
        request = win.params.current_request()
        return (f"method={request['method']} alpha={request['alpha']}"
                f" runs={len(win.run_table.runs)} running={win.controller.running} "
                f"errors={[b.informativeText() for b in messages.OPEN_ERRORS]}")

    try:
        wait_until(lambda: len(win.run_table.runs) == 2 and not win.controller.running)
    except TimeoutError:
        print(state(), file=sys.stderr, flush=True)
        raise
    layerwise = win.run_table.runs[-1]
    table = win.run_table.table
    column = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    row = next(r for r in range(table.rowCount())
               if table.item(r, 0).text() == str(layerwise.run_id))
    folder = Path(out_dir) / "layerwise"
    win.exports.export_result(layerwise, {"result": folder})
    record = json.loads((folder / "result.json").read_text()) if (folder / "result.json") \
        .exists() else {}
    seen["layerwise"] = {
        "method": layerwise.request["method"], "auto": win.reg_panel.auto_alpha.isChecked(),
        "field": win.reg_panel.alpha.value(), "cell": table.item(row, column.index("alpha"))
        .text(), "rule": table.item(row, column.index("alpha rule")).text(),
        "metrics_alpha": layerwise.metrics.alpha,
        "json_alpha": (record.get("metrics") or {}).get("alpha"),
        "json_request_alpha": (record.get("request") or {}).get("alpha"),
        "stale": win.curves.stale}

    # 5. two runs compared in the Runs tab at this screen size: images stay readable
    win.docks["runs"].raise_()
    wait_until(lambda: table.isVisible())
    for r in range(table.rowCount()):
        rect = table.visualRect(table.model().index(r, 1))
        QTest.mouseClick(table.viewport(), QtCore.Qt.MouseButton.LeftButton,
                         CTRL if r else QtCore.Qt.KeyboardModifier.NoModifier, rect.center())
    wait_until(lambda: win.run_table.compare_view.shown is not None)
    settle(0.5)
    seen["compare"] = {
        "window": [win.width(), win.height()],
        "views": {k: [round(w), round(h)] for k, (w, h) in win.image_grid.view_sizes().items()},
        "compared": [[round(p.vb.width()), round(p.vb.height())]
                     for p in win.run_table.compare_view.plots],
        "text": win.run_table.compare_view.text.text()}

    # 6. Open session with an unsaved run: asked first; Cancel keeps everything, Discard opens
    win.files.confirm_quit = True
    answers = ["Cancel", "Discard"]
    asked: list[str] = []

    def answer() -> None:
        box = QtWidgets.QApplication.activeModalWidget()
        if not isinstance(box, QtWidgets.QMessageBox):
            QtCore.QTimer.singleShot(100, answer)
            return
        asked.append(box.text())
        wanted = answers.pop(0)
        button = next(b for b in box.buttons() if b.text().replace("&", "") == wanted)
        QTest.mouseClick(button, QtCore.Qt.MouseButton.LeftButton)

    QtCore.QTimer.singleShot(200, answer)
    opened_cancelled = win.files.open_session(session)
    runs_after_cancel = len(win.run_table.runs)
    QtCore.QTimer.singleShot(200, answer)
    opened = win.files.open_session(session)
    seen["session"] = {"asked": asked, "cancelled_opened": opened_cancelled,
                       "runs_after_cancel": runs_after_cancel, "opened": opened,
                       "runs_after_open": len(win.run_table.runs),
                       "compare_after_open": win.run_table.compare_view.shown}
    win.files.confirm_quit = False
    print(json.dumps(seen), flush=True)
    win.close()
    return 0


def settle(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        QtWidgets.QApplication.processEvents(QtCore.QEventLoop.ProcessEventsFlag.AllEvents, 50)
        time.sleep(0.01)


def type_into(win: Any, box: QtWidgets.QAbstractSpinBox, text: str) -> None:
    """Click into a number field, select all, type ``text``, Enter."""
    win.activateWindow()  # after a dialog closed, shortcuts need the window active again
    wait_until(lambda: win.isActiveWindow(), 10)
    win.docks["parameters"].widget().ensureWidgetVisible(box)
    QTest.mouseDClick(box.lineEdit(), QtCore.Qt.MouseButton.LeftButton)
    QTest.keyClick(box, Key.Key_A, CTRL)
    QTest.keyClicks(box, text)
    QTest.keyClick(box, Key.Key_Return)
    settle(0.2)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
