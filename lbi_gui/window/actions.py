"""Menus, toolbar and keyboard shortcuts of the main window."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from PySide6 import QtGui, QtWidgets


def _action(window: QtWidgets.QMainWindow, text: str, slot: Any, shortcut: str | None = None,
            tip: str | None = None, icon: QtWidgets.QStyle.StandardPixmap | None = None
            ) -> QtGui.QAction:
    act = QtGui.QAction(text, window)
    if shortcut:
        act.setShortcut(QtGui.QKeySequence(shortcut))
    if icon is not None:
        act.setIcon(window.style().standardIcon(icon))
    label = tip or text.replace("&", "").replace("…", "")
    act.setToolTip(f"{label} ({shortcut})" if shortcut else label)
    act.setStatusTip(label)
    act.triggered.connect(lambda _checked=False: slot())
    window.addAction(act)  # shortcuts work whichever dock has the focus
    return act


def _import_network(w: Any) -> None:
    from lbi_gui.dialogs.import_network import open_import_dialog

    open_import_dialog(w)


def build_actions(w: Any) -> SimpleNamespace:
    """Create every action of MainWindow ``w`` and put them into menus and the toolbar."""
    sp = QtWidgets.QStyle.StandardPixmap
    a = SimpleNamespace()
    a.run = _action(w, "&Run", w.run, "Ctrl+R", "Run the inversion", sp.SP_MediaPlay)
    a.pause = _action(w, "&Pause", w.toggle_pause, "Space", "Pause / resume", sp.SP_MediaPause)
    a.stop = _action(w, "&Stop", w.stop, "Esc", "Stop and discard this run", sp.SP_MediaStop)
    a.finish = _action(w, "&Finish now", w.finish_now, "Ctrl+Return",
                       "Finish now — keep this iterate as the result", sp.SP_DialogApplyButton)
    a.reset = _action(w, "Rese&t", w.reset, "Ctrl+Backspace",
                      "Stop and clear the iterate and curves", sp.SP_BrowserReload)
    a.switch = _action(w, "Joint ⇄ layer-wise", w.solver_panel.toggle_joint_layerwise,
                       "Ctrl+L", "Switch between the joint and the layer-wise method")
    a.run_all = _action(w, "Run &all methods", w.run_all_methods, "Ctrl+Shift+R",
                        "Run every method on the current sample")
    a.open_network = _action(w, "Open &network…", w.open_network_dialog, "Ctrl+Shift+N")
    a.import_network = _action(w, "Im&port network…", lambda: _import_network(w), None,
                               "Convert ONNX / .pt2 / a state dict + card once into the zoo's "
                               "safe format and open it")
    a.open_image = _action(w, "Open &image / NPY…", w.open_image_dialog, "Ctrl+I")
    a.open_data = _action(w, "Load measured &y…", w.open_data_dialog)
    a.open_session = _action(w, "&Open session…", w.open_session_dialog, "Ctrl+O")
    a.save_session = _action(w, "&Save session", w.save_session, "Ctrl+S")
    a.save_session_as = _action(w, "Save session &as…", w.save_session_as, "Ctrl+Shift+S")
    a.export = _action(w, "&Export…", w.export_dialog, "Ctrl+E",
                       "Export the result (images, curves, plots, run record)",
                       sp.SP_DialogSaveButton)
    a.quit = _action(w, "&Quit", w.close, "Ctrl+Q", "Quit (stops a running solve cleanly)")
    a.about = _action(w, "&About lbi", w.show_about)
    a.guide = _action(w, "&User guide", w.show_user_guide, "F1",
                      "The user guide: the maths in a few lines and every control explained")
    a.reset_layout = _action(w, "Reset &layout", w.reset_layout)
    a.fit_view = _action(w, "&Fit images to view", w.image_grid.fit_view, "Ctrl+0",
                         "Show the whole image in every view (resets the zoom)")

    bar = w.menuBar()
    file_menu = bar.addMenu("&File")
    for act in (a.open_network, a.import_network, a.open_image, a.open_data):
        file_menu.addAction(act)
    file_menu.addSeparator()
    file_menu.addAction(a.open_session)
    a.recent_menu = file_menu.addMenu("Open &recent")
    file_menu.addAction(a.save_session)
    file_menu.addAction(a.save_session_as)
    file_menu.addSeparator()
    file_menu.addAction(a.export)
    file_menu.addSeparator()
    file_menu.addAction(a.quit)
    run_menu = bar.addMenu("&Run")
    for act in (a.run, a.pause, a.stop, a.finish, a.reset):
        run_menu.addAction(act)
    run_menu.addSeparator()
    run_menu.addAction(a.switch)
    run_menu.addAction(a.run_all)
    a.view_menu = bar.addMenu("&View")
    a.view_menu.addAction(a.fit_view)
    a.view_menu.addSeparator()
    help_menu = bar.addMenu("&Help")
    help_menu.addAction(a.guide)
    help_menu.addAction(a.about)

    tb = w.addToolBar("Run control")
    tb.setObjectName("runToolbar")
    tb.setToolButtonStyle(QtGui.Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
    for act in (a.run, a.pause, a.stop, a.finish, a.reset):
        tb.addAction(act)
    tb.addSeparator()
    tb.addAction(a.switch)
    tb.addAction(a.run_all)
    tb.addSeparator()
    tb.addAction(a.export)
    return a
