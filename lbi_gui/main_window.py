"""The main window: panels in docks, images in the centre, curves and runs below.

The window is a view: parameters live in the panels (``current_request`` collects them),
numbers come from the worker through :class:`~lbi_gui.controller.RunController`, files are
handled by :class:`~lbi_gui.window_files.FilesMixin`.
"""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from lbi_gui import gui_gc
from lbi_gui.actions import build_actions
from lbi_gui.controller import RunController
from lbi_gui.dialogs.messages import show_error
from lbi_gui.params import DEFAULT_REQUEST, PROBLEM_KEYS, default_request, describe_change
from lbi_gui.runs import RunResult
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
from lbi_gui.window_files import FilesMixin
from lbi_gui.window_run import RunMixin

pg.setConfigOptions(imageAxisOrder="row-major", antialias=True, foreground="#333333")

#: Milliseconds a parameter must stay unchanged before it restarts a run (slider drags).
CHANGE_DEBOUNCE_MS = 150


class MainWindow(RunMixin, FilesMixin, QtWidgets.QMainWindow):
    """lbi's desktop window. ``request``: initial parameters; ``autorun``: Run when ready."""

    def __init__(self, request: dict[str, Any] | None = None, *, autorun: bool = False,
                 restore_layout: bool = True) -> None:
        super().__init__()
        gui_gc.install()  # before any worker thread exists: see gui_gc for the deadlock
        self.setWindowTitle("lbi — lifted Bregman inversion")
        self.setObjectName("lbiMainWindow")
        self.setAcceptDrops(True)
        self.setDockOptions(QtWidgets.QMainWindow.DockOption.AnimatedDocks
                            | QtWidgets.QMainWindow.DockOption.AllowTabbedDocks)
        self.controller = RunController(self)
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
        self.run_table = RunTable()
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
        self.session_path: str | None = None
        self._autorun = autorun
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
        self._update_actions()
        QtCore.QTimer.singleShot(0, self.controller.boot)  # torch loads after the window shows

    # ---- layout ---------------------------------------------------------------------------
    def _dock(self, title: str, widget: QtWidgets.QWidget, area: QtCore.Qt.DockWidgetArea,
              scroll: bool = False) -> QtWidgets.QDockWidget:
        dock = QtWidgets.QDockWidget(title, self)
        dock.setObjectName(f"dock_{title.lower()}")
        if scroll:
            sa = QtWidgets.QScrollArea()
            sa.setWidgetResizable(True)
            sa.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
            sa.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            sa.setWidget(widget)
            # Scroll vertically only: the dock is never narrower than its content.
            sa.setMinimumWidth(widget.minimumSizeHint().width()
                               + sa.verticalScrollBar().sizeHint().width() + 2)
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
        self.setCentralWidget(centre)
        left, right = QtCore.Qt.DockWidgetArea.LeftDockWidgetArea, \
            QtCore.Qt.DockWidgetArea.RightDockWidgetArea
        bottom = QtCore.Qt.DockWidgetArea.BottomDockWidgetArea
        self.docks = {
            "network": self._dock("Network", self.network_panel, left),
            "data": self._dock("Data", self.data_panel, left, scroll=True),
            "parameters": self._dock("Parameters", self._parameters_widget(), right, scroll=True),
            "curves": self._dock("Curves", self.curves, bottom),
            "runs": self._dock("Runs", self.run_table, bottom),
        }
        self.tabifyDockWidget(self.docks["data"], self.docks["network"])
        self.tabifyDockWidget(self.docks["curves"], self.docks["runs"])
        self.docks["data"].raise_()
        self.docks["curves"].raise_()
        self.setCorner(QtCore.Qt.Corner.BottomLeftCorner, left)
        self.setCorner(QtCore.Qt.Corner.BottomRightCorner, right)
        self.resize(1600, 1000)
        self._sized = False

    def _default_dock_sizes(self) -> None:
        """Dock proportions that fit the content (only meaningful once the window is shown)."""
        self.resizeDocks([self.docks["data"], self.docks["parameters"]], [380, 370],
                         QtCore.Qt.Orientation.Horizontal)
        self.resizeDocks([self.docks["curves"]], [420], QtCore.Qt.Orientation.Vertical)

    def showEvent(self, event: QtGui.QShowEvent) -> None:  # noqa: N802
        super().showEvent(event)
        if not self._sized:
            self._sized = True
            if not self._restored:
                QtCore.QTimer.singleShot(0, self._default_dock_sizes)

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
        self.status_iter.setMinimumWidth(90)
        self.status_speed.setMinimumWidth(80)
        self.status_reason.setMinimumWidth(220)

    def _restore_layout(self) -> bool:
        """The remembered geometry and dock layout; False when there is none."""
        s = settings()
        geometry, state = s.value("window/geometry"), s.value("window/state")
        if geometry is not None:
            self.restoreGeometry(geometry)
        return state is not None and bool(self.restoreState(state))

    def save_layout(self) -> None:
        s = settings()
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState())

    def reset_layout(self) -> None:
        self.restoreState(self._default_state)
        for dock in self.docks.values():
            dock.show()
        self._default_dock_sizes()

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

    def _panel_changed(self, key: str) -> None:
        if self._pending_old is None:
            self._pending_old = dict(self._request)
        if key == "method":
            self.reg_panel.set_method(self.solver_panel.values()["method"])
        self._request = self.current_request()
        if key in ("network", "input_shape"):
            self.network_panel.allow_pickle = False
            self._request["allow_pickle"] = False
        self._change_timer.start()

    def _apply_change(self) -> None:
        old, self._pending_old = self._pending_old, None
        if old is None:
            return
        new = self.current_request()
        outcome = self.controller.change(old, new)
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
        self.run_table.run_all_requested.connect(self.run_all_methods)
        self.run_table.show_requested.connect(self.show_result)
        self.image_grid.shared_bar.sigLevelsChanged.connect(
            lambda _bar: setattr(self.run_table, "levels", self.image_grid.levels()))

    def _on_booted(self, info: dict[str, Any]) -> None:
        self.network_panel.set_zoo(info.get("zoo", []))
        self.data_panel.set_datasets(info.get("datasets", []))
        self._load_splits(self._request.get("dataset") or "mnist")
        self.solver_panel.set_cuda_available(bool(info.get("cuda")))
        self.set_request(self._request)
        self.controller.prepare(self.current_request())

    def _on_boot_failed(self, err: Any) -> None:
        self.status_state.setText("Engine not available")
        show_error(self, "The numerical engine could not be loaded", err.message,
                   detail=err.detail, fix="Check the installation (pip install -e .) and "
                                          "restart lbi-gui.")

    def _load_splits(self, dataset: str) -> None:
        """Splits of ``dataset`` ("" = keep them) and the size of the chosen split."""
        from lbi_gui import engine

        if not engine.engine_loaded():
            return
        eng = engine.load_engine()
        values = self.data_panel.values()
        try:
            if dataset:
                self.data_panel.set_splits(list(eng.list_splits(dataset)), None)
                values = self.data_panel.values()
            self.data_panel.set_size(eng.dataset_size(values["dataset"], values["split"]))
        except Exception as exc:  # noqa: BLE001 - an unknown dataset name from a session
            self.statusBar().showMessage(f"Dataset: {exc}", 5000)

    def _load_thumbnails(self, dataset: str, split: str, start: int, count: int) -> None:
        from lbi_gui import engine

        if not engine.engine_loaded():
            return  # the booted handler asks again once the engine is there
        eng = engine.load_engine()
        images = []
        for i in range(start, start + count):
            try:
                images.append(eng.get_sample(dataset, split, i)[0].detach().cpu().numpy())
            except Exception:  # noqa: BLE001 - past the end of the split, or an unknown set
                break
        self.data_panel.set_thumbnails(start, images)

    # ---- misc -----------------------------------------------------------------------------
    def show_about(self) -> None:
        from lbi_gui.dialogs.about import show_about

        show_about(self)

    def dragEnterEvent(self, event: QtGui.QDragEnterEvent) -> None:  # noqa: N802
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event: QtGui.QDropEvent) -> None:  # noqa: N802
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            self.open_path(paths[0])

    def closeEvent(self, event: QtGui.QCloseEvent) -> None:  # noqa: N802
        """Stop a running solve cleanly (cancel, quit, wait) before the window goes."""
        self._change_timer.stop()
        self.save_layout()
        self.controller.shutdown()
        event.accept()
        super().closeEvent(event)

    @staticmethod
    def problem_keys_changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
        return any(old.get(k) != new.get(k) for k in PROBLEM_KEYS)
