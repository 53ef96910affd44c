"""Shortcuts, drag-and-drop, remembered folders/recent files/layout (temporary QSettings)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper
from PySide6 import QtCore, QtGui

from lbi_gui.settings import last_dir, recent_files, settings
from tests.gui.conftest import wait_idle, wait_iterations


def test_shortcuts(qtbot, make_window) -> None:
    win = make_window({"max_iter": 100000, "tol": 0.0})
    expected = {"run": "Ctrl+R", "pause": "Space", "stop": "Esc", "quit": "Ctrl+Q",
                "export": "Ctrl+E", "save_session": "Ctrl+S", "open_session": "Ctrl+O",
                "finish": "Ctrl+Return", "switch": "Ctrl+L"}
    for name, keys in expected.items():
        assert getattr(win.actions_, name).shortcut() == QtGui.QKeySequence(keys), name
    # the shortcuts reach their actions from the window (offscreen: through the shortcut map)
    win.activateWindow()
    win.image_grid.setFocus()
    qtbot.keyClick(win, QtCore.Qt.Key.Key_R, QtCore.Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: win.controller.running, timeout=5000)
    wait_iterations(qtbot, win, 5)
    qtbot.keyClick(win, QtCore.Qt.Key.Key_Escape)
    wait_idle(qtbot, win, timeout=10000)
    assert win.run_table.runs == []  # Esc = Stop (discard)


def test_drop_a_network_file(qtbot, make_window, tmp_path) -> None:
    win = make_window()
    # Flatten -> Linear 784->16 -> ReLU, written with onnx.helper: the legacy torch exporter is
    # deprecated and the new one takes ~10 s; the test is about the drop, not the export.
    w = np.random.default_rng(0).normal(size=(16, 784)).astype(np.float32) / 28
    graph = helper.make_graph(
        [helper.make_node("Flatten", ["x"], ["f"]),
         helper.make_node("Gemm", ["f", "w", "b"], ["z"], transB=1),
         helper.make_node("Relu", ["z"], ["y"])],
        "dropped",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", 1, 28, 28])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["n", 16])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.zeros(16, np.float32), "b")])
    path = tmp_path / "dropped.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    mime = QtCore.QMimeData()
    mime.setUrls([QtCore.QUrl.fromLocalFile(str(path))])
    event = QtGui.QDropEvent(QtCore.QPointF(10, 10), QtCore.Qt.DropAction.CopyAction, mime,
                             QtCore.Qt.MouseButton.LeftButton,
                             QtCore.Qt.KeyboardModifier.NoModifier)
    win.dropEvent(event)
    qtbot.waitUntil(lambda: win.view.info.request["network"] == str(path), timeout=30000)
    assert win.network_panel.table.rowCount() == 1
    assert last_dir("network") == str(tmp_path)


def test_recent_sessions_and_layout_are_remembered(qtbot, make_window, tmp_path) -> None:
    win = make_window()
    path = tmp_path / "remember.lbisession"
    assert win.files.save_session_to(str(path))
    assert recent_files()[0] == str(path.resolve())
    entries = [a for a in win.actions_.recent_menu.actions() if a.data()]  # not the headers
    assert entries[0].text() == path.name and entries[0].data() == "sessions"
    win.docks["curves"].hide()
    win.close()
    assert settings().value("window/state") is not None
    again = make_window(restore_layout=True)
    assert again.docks["curves"].isHidden()
    again.reset_layout()
    assert not again.docks["curves"].isHidden()
    assert settings().fileName().startswith(str(tmp_path.parents[1]))  # never the user's
