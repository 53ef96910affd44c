"""Menus, toolbar and keyboard shortcuts of the main window, and which of them are enabled."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from PySide6 import QtGui, QtWidgets

from lbi_gui.engine.messages import PreparedInfo
from lbi_gui.model.view_state import ViewState
from lbi_gui.widgets.run_table import RunTable
from lbi_gui.window.controller import RunController

Slot = Callable[[], object]

STATE_TEXT = {"booting": "Starting engine…", "idle": "Ready", "preparing": "Preparing…",
              "running": "Running", "paused": "Paused"}


@dataclass
class WindowActions:
    """The main window's actions (menus, toolbar, shortcuts) and the menus filled later."""

    run: QtGui.QAction
    pause: QtGui.QAction
    stop: QtGui.QAction
    finish: QtGui.QAction
    reset: QtGui.QAction
    switch: QtGui.QAction
    run_all: QtGui.QAction
    open_network: QtGui.QAction
    import_network: QtGui.QAction
    fit_prior: QtGui.QAction
    open_image: QtGui.QAction
    open_data: QtGui.QAction
    open_session: QtGui.QAction
    save_session: QtGui.QAction
    save_session_as: QtGui.QAction
    export: QtGui.QAction
    quit: QtGui.QAction
    about: QtGui.QAction
    guide: QtGui.QAction
    reset_layout: QtGui.QAction
    fit_view: QtGui.QAction
    recent_menu: QtWidgets.QMenu
    view_menu: QtWidgets.QMenu


def _action(window: QtWidgets.QMainWindow, text: str, slot: Slot, shortcut: str | None = None,
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


def build_actions(w: QtWidgets.QMainWindow, slots: Mapping[str, Slot],
                  recent_menu: QtWidgets.QMenu,
                  docks: Iterable[QtWidgets.QDockWidget]) -> WindowActions:
    """Create every action of the main window ``w``, each calling ``slots[name]``, and put
    them into menus and the toolbar (``recent_menu``: File → Open recent, filled by the
    file commands; View lists ``docks``)."""
    sp = QtWidgets.QStyle.StandardPixmap

    def act(name: str, text: str, shortcut: str | None = None, tip: str | None = None,
            icon: QtWidgets.QStyle.StandardPixmap | None = None) -> QtGui.QAction:
        return _action(w, text, slots[name], shortcut, tip, icon)

    run = act("run", "&Run", "Ctrl+R", "Run the inversion", sp.SP_MediaPlay)
    pause = act("pause", "&Pause", "Space", "Pause / resume", sp.SP_MediaPause)
    stop = act("stop", "&Stop", "Esc", "Stop and discard this run", sp.SP_MediaStop)
    finish = act("finish", "&Finish now", "Ctrl+Return",
                 "Finish now — keep this iterate as the result", sp.SP_DialogApplyButton)
    reset = act("reset", "Rese&t", "Ctrl+Backspace", "Stop and clear the iterate and curves",
                sp.SP_BrowserReload)
    switch = act("switch", "Joint ⇄ layer-wise", "Ctrl+L",
                 "Switch between the joint and the layer-wise method")
    run_all = act("run_all", "Run &all methods", "Ctrl+Shift+R",
                  "Run every method on the current sample")
    open_network = act("open_network", "Open &network…", "Ctrl+Shift+N")
    import_network = act("import_network", "Im&port network…", None,
                         "Convert ONNX / .pt2 / a state dict + card once into the zoo's "
                         "safe format and open it")
    fit_prior = act("fit_prior", "Fit a &feature prior…", None,
                    "Fit the prior layer-wise inversion needs for this network from a folder "
                    "of your clean images")
    open_image = act("open_image", "Open &image / NPY…", "Ctrl+I")
    open_data = act("open_data", "Load measured &y…")
    open_session = act("open_session", "&Open session…", "Ctrl+O")
    save_session = act("save_session", "&Save session", "Ctrl+S")
    save_session_as = act("save_session_as", "Save session &as…", "Ctrl+Shift+S")
    export = act("export", "&Export…", "Ctrl+E",
                 "Export the result (images, curves, plots, run record)",
                 sp.SP_DialogSaveButton)
    quit_ = act("quit", "&Quit", "Ctrl+Q", "Quit (stops a running solve cleanly)")
    about = act("about", "&About lbi")
    guide = act("guide", "&User guide", "F1",
                "The user guide: the maths in a few lines and every control explained")
    reset_layout = act("reset_layout", "Reset &layout")
    fit_view = act("fit_view", "&Fit images to view", "Ctrl+0",
                   "Show the whole image in every view (resets the zoom)")

    bar = w.menuBar()
    file_menu = bar.addMenu("&File")
    for a in (open_network, import_network, fit_prior, open_image, open_data):
        file_menu.addAction(a)
    file_menu.addSeparator()
    file_menu.addAction(open_session)
    file_menu.addMenu(recent_menu)
    file_menu.addAction(save_session)
    file_menu.addAction(save_session_as)
    file_menu.addSeparator()
    file_menu.addAction(export)
    file_menu.addSeparator()
    file_menu.addAction(quit_)
    run_menu = bar.addMenu("&Run")
    for a in (run, pause, stop, finish, reset):
        run_menu.addAction(a)
    run_menu.addSeparator()
    run_menu.addAction(switch)
    run_menu.addAction(run_all)
    view_menu = bar.addMenu("&View")
    view_menu.addAction(fit_view)
    view_menu.addSeparator()
    for dock in docks:
        view_menu.addAction(dock.toggleViewAction())
    view_menu.addSeparator()
    view_menu.addAction(reset_layout)
    help_menu = bar.addMenu("&Help")
    help_menu.addAction(guide)
    help_menu.addAction(about)

    tb = w.addToolBar("Run control")
    tb.setObjectName("runToolbar")
    tb.setToolButtonStyle(QtGui.Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
    for a in (run, pause, stop, finish, reset):
        tb.addAction(a)
    tb.addSeparator()
    tb.addAction(switch)
    tb.addAction(run_all)
    tb.addSeparator()
    tb.addAction(export)
    return WindowActions(
        run=run, pause=pause, stop=stop, finish=finish, reset=reset, switch=switch,
        run_all=run_all, open_network=open_network, import_network=import_network,
        fit_prior=fit_prior,
        open_image=open_image, open_data=open_data, open_session=open_session,
        save_session=save_session, save_session_as=save_session_as, export=export,
        quit=quit_, about=about, guide=guide, reset_layout=reset_layout, fit_view=fit_view,
        recent_menu=recent_menu, view_menu=view_menu)


class ActionStates:
    """Which actions are enabled, and the state in the status bar: a rendering of the
    controller's state and of ``view`` (re-drawn on each of its events; the window also
    calls :meth:`update` after every controller signal that changes what a run allows)."""

    def __init__(self, actions: WindowActions, controller: RunController,
                 view: ViewState[PreparedInfo], switch: QtWidgets.QWidget, run_table: RunTable,
                 state_label: QtWidgets.QLabel) -> None:
        self.actions, self.controller, self.view = actions, controller, view
        self.switch, self.run_table, self.state_label = switch, run_table, state_label
        for event in view.events:
            event.connect(lambda _value: self.update())

    def update(self) -> None:
        c, a, view = self.controller, self.actions, self.view
        a.switch.setEnabled(self.switch.isEnabled())
        a.switch.setToolTip(self.switch.toolTip())
        ready = c.engine_info is not None and view.info is not None
        # Run is enabled while the engine starts: a run asked for then is queued.
        a.run.setEnabled(not view.boot_failed)
        a.run_all.setEnabled(ready and not c.running)
        a.pause.setEnabled(c.running)
        a.pause.setText("Resume" if c.paused else "Pause")
        a.stop.setEnabled(c.running)
        a.finish.setEnabled(c.running)
        exportable = bool(self.run_table.runs) or view.shown_result is not None
        a.export.setEnabled(exportable)
        a.export.setToolTip("Export a finished run: images, curves, result.json (Ctrl+E)"
                            if exportable else "Nothing to export yet: finish a run first "
                            "(a run in the Runs table, or shown from a session)")
        text = STATE_TEXT.get(c.state, c.state)
        if c.queue_active and view.queue_text:
            text = f"{text} — {view.queue_text}"
        if c.state == "booting" and view.autorun:
            text = "Starting engine… (the run begins by itself)"
        self.state_label.setText(text)
