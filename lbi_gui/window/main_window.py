"""The main window: panels in docks, images in the centre, curves and runs below.

The window is a view: parameters live in the panels (``current_request`` collects them),
numbers come from the worker through :class:`~lbi_gui.window.controller.RunController`, files are
handled by :class:`~lbi_gui.window.files.FilesMixin`.
"""

from __future__ import annotations

import os
from typing import Any

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from lbi_gui import gui_gc
from lbi_gui.dialogs.messages import show_error
from lbi_gui.model import AppModel
from lbi_gui.model.runs import RunResult
from lbi_gui.params import DEFAULT_REQUEST, PROBLEM_KEYS, default_request, describe_change
from lbi_gui.settings import settings
from lbi_gui.widgets.aux_strip import AuxStrip
from lbi_gui.widgets.curves import CurvesPanel
from lbi_gui.widgets.data_panel import DataPanel
from lbi_gui.widgets.image_grid import ImageGrid
from lbi_gui.widgets.network_panel import NetworkPanel
from lbi_gui.widgets.noise_panel import NoisePanel
from lbi_gui.widgets.regularisation_panel import RegularisationPanel
from lbi_gui.widgets.run_table import RunTable
from lbi_gui.widgets.solver_panel import SolverPanel
from lbi_gui.window.actions import build_actions
from lbi_gui.window.controller import RunController
from lbi_gui.window.data import DataMixin
from lbi_gui.window.files import FilesMixin
from lbi_gui.window.run import RunMixin

pg.setConfigOptions(imageAxisOrder="row-major", antialias=True, foreground="#333333")

#: The window's preferred size; it opens smaller when the screen's available area is smaller.
PREFERRED_SIZE = (1600, 1000)
#: Room left for the window manager's frame and title bar (the geometry excludes them).
FRAME_MARGIN = (16, 40)
#: Side docks never ask for more width than this; narrower content scrolls instead.
DOCK_MAX_MIN_WIDTH = 270


def fit_geometry(available: QtCore.QRect, wanted: QtCore.QRect | None = None) -> QtCore.QRect:
    """Where the window opens: ``wanted`` (a remembered geometry) or the preferred size
    (centred), shrunk to the screen's ``available`` area and moved inside it.

    The geometry excludes the window manager's frame: a border of ``FRAME_MARGIN[0] / 2`` on
    the left, right and bottom and a title bar making ``FRAME_MARGIN[1]`` in all vertically.
    """
    border = FRAME_MARGIN[0] // 2
    top = FRAME_MARGIN[1] - border
    max_w = max(200, available.width() - FRAME_MARGIN[0])
    max_h = max(200, available.height() - FRAME_MARGIN[1])
    if wanted is None or not wanted.isValid():
        w, h = min(PREFERRED_SIZE[0], max_w), min(PREFERRED_SIZE[1], max_h)
        x = available.x() + border + (max_w - w) // 2
        y = available.y() + top + (max_h - h) // 2
        return QtCore.QRect(x, y, w, h)
    w, h = min(wanted.width(), max_w), min(wanted.height(), max_h)
    x = min(max(wanted.x(), available.x() + border), available.right() + 1 - border - w)
    y = min(max(wanted.y(), available.y() + top), available.bottom() + 1 - border - h)
    return QtCore.QRect(x, y, w, h)


#: Milliseconds a parameter must stay unchanged before it restarts a run (slider drags).
CHANGE_DEBOUNCE_MS = 150


class MainWindow(RunMixin, FilesMixin, DataMixin, QtWidgets.QMainWindow):
    """lbi's desktop window. ``request``: initial parameters; ``autorun``: Run when ready."""

    def __init__(self, request: dict[str, Any] | None = None, *, autorun: bool = False,
                 restore_layout: bool = True, controller: RunController | None = None) -> None:
        super().__init__()
        gui_gc.install()  # before any worker thread exists: see gui_gc for the deadlock
        self.setWindowTitle("lbi — lifted Bregman inversion")
        self.setObjectName("lbiMainWindow")
        self.setAcceptDrops(True)
        self.setDockOptions(QtWidgets.QMainWindow.DockOption.AnimatedDocks
                            | QtWidgets.QMainWindow.DockOption.AllowTabbedDocks)
        # A caller may pass its own controller (e.g. one whose engine is already loading).
        self.controller = controller or RunController(self)
        self.controller.setParent(self)
        #: The Qt-free application state: the current request, the runs, the session file.
        self.model = AppModel()
        self.network_panel = NetworkPanel()
        self.data_panel = DataPanel()
        self.noise_panel = NoisePanel()
        self.reg_panel = RegularisationPanel()
        self.solver_panel = SolverPanel()
        self.panels = (self.network_panel, self.data_panel, self.noise_panel, self.reg_panel,
                       self.solver_panel)
        self.image_grid = ImageGrid()
        self.aux_strip = AuxStrip()
        self.curves = CurvesPanel()
        self.run_table = RunTable(model=self.model.runs)
        self._build_layout()
        self.actions_ = build_actions(self)
        for dock in self.docks.values():
            self.actions_.view_menu.addAction(dock.toggleViewAction())
        self.actions_.view_menu.addSeparator()
        self.actions_.view_menu.addAction(self.actions_.reset_layout)
        self._build_status()
        self.info: Any = None  # PreparedInfo of the problem on screen
        self.good_request: dict[str, Any] | None = None  # last request that prepared fine
        self.shown_result: RunResult | None = None
        self._autorun = autorun
        #: Ask about unsaved runs on quit ($LBI_GUI_CONFIRM_QUIT=0: never; tests, scripts).
        self.confirm_quit = os.environ.get("LBI_GUI_CONFIRM_QUIT", "1") != "0"
        self._closing = False
        self._pending_old: dict[str, Any] | None = None
        self._change_timer = QtCore.QTimer(self, singleShot=True, interval=CHANGE_DEBOUNCE_MS)
        self._change_timer.timeout.connect(self._apply_change)
        self._request = default_request()
        if request:
            self._request.update(request)
        self.set_request(self._request)
        for panel in self.panels:
            panel.changed.connect(self._panel_changed)
        self._wire()
        self._default_state = self.saveState()
        self._restored = restore_layout and self._restore_layout()
        self.update_recent_menu()
        self._show_data_early()
        self._watch_number_fields()
        self._update_actions()
        if self.controller.engine_info is not None:  # booted while the window was built
            QtCore.QTimer.singleShot(0, lambda: self._on_booted(self.controller.engine_info))
        # A thread backend imports torch in this process: only after the window shows.
        QtCore.QTimer.singleShot(0, self.controller.boot)

    # ---- layout ---------------------------------------------------------------------------
    def _dock(self, title: str, widget: QtWidgets.QWidget, area: QtCore.Qt.DockWidgetArea,
              scroll: bool = False, max_min_width: int | None = DOCK_MAX_MIN_WIDTH
              ) -> QtWidgets.QDockWidget:
        dock = QtWidgets.QDockWidget(title, self)
        dock.setObjectName(f"dock_{title.lower()}")
        if scroll:
            sa = QtWidgets.QScrollArea()
            sa.setWidgetResizable(True)
            sa.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
            sa.setWidget(widget)
            # Scroll vertically; horizontally only when the user narrows the dock below its
            # content (a dock that insisted on its content's width pushed the window past
            # a 1024-pixel screen).
            need = widget.minimumSizeHint().width() + sa.verticalScrollBar().sizeHint().width() + 2
            sa.setMinimumWidth(need if max_min_width is None else min(max_min_width, need))
            if max_min_width is None:
                sa.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            widget = sa
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        return dock

    def _parameters_widget(self) -> QtWidgets.QWidget:
        """Noise, regularisation and solver settings as titled sections of one column."""
        box = QtWidgets.QWidget()
        lay = QtWidgets.QVBoxLayout(box)
        lay.setContentsMargins(4, 4, 4, 4)
        for title, panel in (("Noise", self.noise_panel), ("Regularisation", self.reg_panel),
                             ("Solver", self.solver_panel)):
            group = QtWidgets.QGroupBox(title)
            g = QtWidgets.QVBoxLayout(group)
            g.setContentsMargins(2, 2, 2, 2)
            g.addWidget(panel)
            lay.addWidget(group)
        lay.addStretch(1)
        return box

    def _build_layout(self) -> None:
        centre = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        centre.addWidget(self.image_grid)
        centre.addWidget(self.aux_strip)
        centre.setStretchFactor(0, 3)
        centre.setStretchFactor(1, 1)
        centre.setSizes([300, 130])
        centre.setCollapsible(0, False)  # the images never vanish behind the strip
        # The strip of auxiliary variables yields its room first: the window's minimum
        # height must stay within a 720-pixel screen with the images at a readable size.
        self.aux_strip.setMinimumHeight(24)
        self.setCentralWidget(centre)
        left, right = QtCore.Qt.DockWidgetArea.LeftDockWidgetArea, \
            QtCore.Qt.DockWidgetArea.RightDockWidgetArea
        bottom = QtCore.Qt.DockWidgetArea.BottomDockWidgetArea
        self.docks = {
            "network": self._dock("Network", self.network_panel, left, scroll=True),
            "data": self._dock("Data", self.data_panel, left, scroll=True),
            # Parameters keep their full width (sliders beside values); they scroll vertically.
            "parameters": self._dock("Parameters", self._parameters_widget(), right, scroll=True,
                                     max_min_width=None),
            "curves": self._dock("Curves", self.curves, bottom),
            "runs": self._dock("Runs", self.run_table, bottom),
        }
        self.tabifyDockWidget(self.docks["data"], self.docks["network"])
        self.tabifyDockWidget(self.docks["curves"], self.docks["runs"])
        self.docks["data"].raise_()
        self.docks["curves"].raise_()
        self.setCorner(QtCore.Qt.Corner.BottomLeftCorner, left)
        self.setCorner(QtCore.Qt.Corner.BottomRightCorner, right)
        self.setGeometry(fit_geometry(self._available()))
        self._sized = False

    def _available(self) -> QtCore.QRect:
        """The available area (without panels/taskbars) of the screen the window is on."""
        screen = self.screen() or QtGui.QGuiApplication.primaryScreen()
        return screen.availableGeometry() if screen is not None else QtCore.QRect(0, 0, 1280, 720)

    def _default_dock_sizes(self) -> None:
        """Dock proportions that fit the content (only meaningful once the window is shown)."""
        side = max(DOCK_MAX_MIN_WIDTH, min(380, self.width() // 4))
        self.resizeDocks([self.docks["data"], self.docks["parameters"]], [side, 370],
                         QtCore.Qt.Orientation.Horizontal)
        self.resizeDocks([self.docks["curves"]], [max(200, int(self.height() * 0.4))],
                         QtCore.Qt.Orientation.Vertical)

    def showEvent(self, event: QtGui.QShowEvent) -> None:
        super().showEvent(event)
        if not self._sized:
            self._sized = True
            if not self._restored:
                QtCore.QTimer.singleShot(0, self._default_dock_sizes)
            else:  # a remembered layout that leaves the images unreadable is not used
                QtCore.QTimer.singleShot(50, self._reset_if_unreadable)

    def _reset_if_unreadable(self) -> None:
        if self.image_grid.isVisible() and not self.image_grid.readable():
            self.reset_layout()

    def _build_status(self) -> None:
        bar = self.statusBar()
        self.status_state = QtWidgets.QLabel("Loading the engine…")
        self.status_iter = QtWidgets.QLabel("k = —")
        self.status_speed = QtWidgets.QLabel("— it/s")
        self.status_time = QtWidgets.QLabel("0.0 s")
        self.status_reason = QtWidgets.QLabel("")
        self.progress = QtWidgets.QProgressBar()
        self.progress.setMaximumWidth(120)
        self.progress.setTextVisible(False)
        for w in (self.status_state, self.status_iter, self.status_speed, self.status_time,
                  self.progress, self.status_reason):
            bar.addPermanentWidget(w)
        self.status_iter.setMinimumWidth(70)
        self.status_speed.setMinimumWidth(60)
        self.status_reason.setMinimumWidth(120)

    def _restore_layout(self) -> bool:
        """The remembered geometry and dock layout; False when there is none."""
        s = settings()
        geometry, state = s.value("window/geometry"), s.value("window/state")
        if geometry is not None and self.restoreGeometry(geometry):
            # Qt's restore clamps to the screen it sees now; the size the user chose is
            # remembered on its own, and shrunk only to this screen's available area.
            size = s.value("window/size")
            wanted = self.geometry()
            if isinstance(size, QtCore.QSize) and size.isValid():
                wanted.setSize(size)
            if not self.isMaximized():
                self.setGeometry(fit_geometry(self._available(), wanted))
        return state is not None and bool(self.restoreState(state))

    def save_layout(self) -> None:
        """Remembers geometry and docks; a layout whose image views are squeezed below a
        readable size is not remembered (the next launch starts from the default)."""
        s = settings()
        s.setValue("window/geometry", self.saveGeometry())
        normal = self.normalGeometry() if self.isMaximized() else self.geometry()
        s.setValue("window/size", normal.size())
        if self.image_grid.isVisible() and not self.image_grid.readable():
            s.remove("window/state")
        else:
            s.setValue("window/state", self.saveState())

    def reset_layout(self) -> None:
        """The default docks at proportions that fit this window (View → Reset layout)."""
        self.restoreState(self._default_state)
        for dock in self.docks.values():
            dock.show()
        self.docks["data"].raise_()
        self.docks["curves"].raise_()
        self._default_dock_sizes()
        # Docks settle after the restore is laid out: size them again then.
        QtCore.QTimer.singleShot(0, self._default_dock_sizes)

    # ---- state kept in the model ------------------------------------------------------------
    @property
    def _request(self) -> dict[str, Any]:
        """The request behind the panels (also fields without a widget): the model's
        selection, read and changed in place by the window's mixins."""
        return self.model.selection.request

    @_request.setter
    def _request(self, request: dict[str, Any]) -> None:
        self.model.selection.replace(request)

    @property
    def session_path(self) -> str | None:
        return self.model.session_path

    @session_path.setter
    def session_path(self, path: str | None) -> None:
        self.model.session_path = path

    @property
    def saved_run_ids(self) -> set[int]:
        """Ids of the runs in the saved (or opened) session file."""
        return self.model.runs.saved_ids

    @saved_run_ids.setter
    def saved_run_ids(self, ids: set[int]) -> None:
        self.model.runs.saved_ids = set(ids)

    # ---- parameters -----------------------------------------------------------------------
    def current_request(self) -> dict[str, Any]:
        """The request the panels describe (InversionRequest fields)."""
        req = dict(self._request)
        for panel in self.panels:
            req.update(panel.values())
        return req

    def set_request(self, request: dict[str, Any]) -> None:
        """Show ``request`` in every panel without triggering runs."""
        for panel in self.panels:
            panel.set_values(request)
        self.reg_panel.set_method(self.solver_panel.values()["method"])
        merged = dict(self._request)
        merged.update({k: v for k, v in request.items() if k in DEFAULT_REQUEST})
        self._request = merged  # fields without a widget (time_budget, options) come from here
        self._request = self.current_request()
        self.noise_panel.set_measured(bool(self._request.get("data")))

    def _panel_changed(self, key: str) -> None:
        if self._pending_old is None:
            self._pending_old = dict(self._request)
        if key == "method":
            self.reg_panel.set_method(self.solver_panel.values()["method"])
        if key in ("network", "dataset"):
            self._match_network_and_data(key)
        self._request = self.current_request()
        self.noise_panel.set_measured(bool(self._request.get("data")))
        if key in ("network", "input_shape"):
            self.network_panel.allow_pickle = False
            self._request["allow_pickle"] = False
        self._change_timer.start()

    def _apply_change(self) -> None:
        old, self._pending_old = self._pending_old, None
        if old is None:
            return
        new = self.current_request()
        if self.controller.engine_info is None:
            self._preview_truth()  # the booted handler prepares whatever is on screen then
            return
        outcome = self.controller.change(old, new)
        self.refresh_stale()
        if outcome == "restart":
            self.statusBar().showMessage(f"Warm restart: {describe_change(old, new)}", 4000)
        elif outcome == "stopped":
            self.statusBar().showMessage("Network or data changed: run stopped", 4000)

    def flush_changes(self) -> None:
        """Apply pending (debounced) parameter edits now."""
        if self._change_timer.isActive():
            self._change_timer.stop()
            self._apply_change()

    # ---- wiring ---------------------------------------------------------------------------
    def _wire(self) -> None:
        c = self.controller
        # the auxiliary variable under the mouse reads out on the images' line
        self.aux_strip.hovered.connect(
            lambda text: self.image_grid.readout.setText(text or " "))
        c.booted.connect(self._on_booted)
        c.boot_failed.connect(self._on_boot_failed)
        c.prepared.connect(self._on_prepared)
        c.prepare_failed.connect(self._on_prepare_failed)
        c.view_update.connect(self._on_view_update)
        c.restart_marked.connect(self._on_restart_marked)
        c.run_finished.connect(self._on_run_finished)
        c.run_failed.connect(self._on_run_failed)
        c.queue_done.connect(self._on_queue_done)
        c.state_changed.connect(lambda _s: self._update_actions())
        self.network_panel.open_requested.connect(self.open_network_dialog)
        self.data_panel.open_image_requested.connect(self.open_image_dialog)
        self.data_panel.open_data_requested.connect(self.open_data_dialog)
        self.data_panel.splits_needed.connect(self._load_splits)
        self.data_panel.thumbnails_needed.connect(self._load_thumbnails)
        self.run_table.run_all_requested.connect(self.run_all_or_cancel)
        c.queue_progress.connect(self._on_queue_progress)
        self.run_table.load_requested.connect(self.load_run_parameters)
        self.run_table.table.itemSelectionChanged.connect(self._overlay_selected)
        self.run_table.export_table_requested.connect(self.export_runs_table)
        self.run_table.show_requested.connect(self.show_result)
        self.image_grid.shared_bar.sigLevelsChanged.connect(
            lambda _bar: setattr(self.run_table, "levels", self.image_grid.levels()))

    def _on_booted(self, info: dict[str, Any]) -> None:
        self.network_panel.set_zoo(info.get("zoo", []))
        self.data_panel.set_datasets(info.get("datasets", []))
        self._load_splits(self._request.get("dataset") or "mnist")
        self.solver_panel.set_cuda_available(bool(info.get("cuda")))
        self.set_request(self._request)
        if self._autorun:  # a queued run: it prepares the problem itself (one job, not two)
            self._autorun = False
            self.run()
        else:
            self.controller.prepare(self.current_request())

    def _on_boot_failed(self, err: Any) -> None:
        self._boot_failed = True
        self._autorun = False
        self._update_actions()
        self.status_state.setText("Engine not available")
        show_error(self, "The numerical engine could not be loaded", err.message,
                   detail=err.detail, fix="Check the installation (pip install -e .) and "
                                          "restart lbi-gui.")

    # ---- misc -----------------------------------------------------------------------------
    def show_user_guide(self) -> Any:
        from lbi_gui.dialogs.user_guide import show_user_guide

        return show_user_guide(self)

    def show_about(self) -> None:
        from lbi_gui.dialogs.about import show_about

        show_about(self)

    def dragEnterEvent(self, event: QtGui.QDragEnterEvent) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event: QtGui.QDropEvent) -> None:
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            self.open_path(paths[0])

    def unsaved_runs(self) -> list[RunResult]:
        """Finished runs that are in no saved session (asked about on quit)."""
        return self.model.runs.unsaved()

    def may_discard(self, action: str) -> bool:
        """Before ``action`` loses runs not in a saved session or a live run: ask (save,
        discard or cancel); True when it may go on."""
        unsaved, running = self.unsaved_runs(), self.controller.running
        if not self.confirm_quit or not (unsaved or running):
            return True
        from lbi_gui.dialogs import messages

        answer = messages.ask_unsaved_runs(self, len(unsaved), running=running, action=action)
        return not (answer == "cancel" or (answer == "save" and not self.save_session()))

    def closeEvent(self, event: QtGui.QCloseEvent) -> None:
        """Ask about unsaved runs and a live run, then stop a running solve cleanly (cancel,
        quit, wait)."""
        if not self._closing and not self.may_discard("quitting"):
            event.ignore()
            return
        self._closing = True
        self._change_timer.stop()
        self.save_layout()
        self.controller.shutdown()
        event.accept()
        super().closeEvent(event)

    @staticmethod
    def problem_keys_changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
        return any(old.get(k) != new.get(k) for k in PROBLEM_KEYS)
