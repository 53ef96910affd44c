"""The main window: panels in docks, images in the centre, curves and runs below.

The window is a view over :class:`~lbi_gui.model.AppModel` (the request in its selection, the
runs); numbers come from the worker through :class:`~lbi_gui.window.controller.RunController`.
What it does is split among collaborators handed the window (:class:`~lbi_gui.window.host.
WindowHost`): runs and their display (:class:`~lbi_gui.window.run.RunView`), files
(:class:`~lbi_gui.window.files.FileCommands`) and the data's sources
(:class:`~lbi_gui.window.data.DataInputs`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from lbi_gui import gui_gc
from lbi_gui.dialogs.user_guide import UserGuide
from lbi_gui.engine.messages import PreparedInfo, Progress
from lbi_gui.model import AppModel
from lbi_gui.model.runs import RunResult
from lbi_gui.params import default_request
from lbi_gui.widgets.aux_strip import AUX_MIN_HEIGHT, AuxStrip
from lbi_gui.widgets.curves import CurvesPanel
from lbi_gui.widgets.data_panel import DataPanel
from lbi_gui.widgets.image_grid import ImageGrid
from lbi_gui.widgets.network_panel import NetworkPanel
from lbi_gui.widgets.noise_panel import NoisePanel
from lbi_gui.widgets.panel import ParamPanel
from lbi_gui.widgets.regularisation_panel import RegularisationPanel
from lbi_gui.widgets.run_table import RunTable
from lbi_gui.widgets.solver_panel import SolverPanel
from lbi_gui.window import layout
from lbi_gui.window.actions import Slot, build_actions
from lbi_gui.window.controller import RunController
from lbi_gui.window.data import DataInputs, FieldShortcuts
from lbi_gui.window.files import FileCommands
from lbi_gui.window.layout import CENTRE_WIDTH, DOCK_MAX_MIN_WIDTH, add_dock, titled_column
from lbi_gui.window.parameters import Parameters
from lbi_gui.window.run import RunView

pg.setConfigOptions(imageAxisOrder="row-major", antialias=True, foreground="#333333")

class MainWindow(QtWidgets.QMainWindow):
    """lbi's desktop window. ``request``: initial parameters; ``autorun``: Run when ready."""

    def __init__(self, request: dict[str, Any] | None = None, *, autorun: bool = False,
                 restore_layout: bool = True, controller: RunController | None = None) -> None:
        super().__init__()
        gui_gc.install()  # before any worker thread exists: see gui_gc for the deadlock
        self.setWindowTitle("lifted Bregman inversion")  # Qt adds " — lbi", the display name
        self.setObjectName("lbiMainWindow")
        self.setAcceptDrops(True)
        self.setDockOptions(QtWidgets.QMainWindow.DockOption.AnimatedDocks
                            | QtWidgets.QMainWindow.DockOption.AllowTabbedDocks)
        # A caller may pass its own controller (e.g. one whose engine is already loading).
        self.controller = controller or RunController(self)
        self.controller.setParent(self)
        #: The Qt-free application state: the current request, the runs, the session file.
        self.model = AppModel(default_request())
        self.network_panel = NetworkPanel()
        self.data_panel = DataPanel()
        self.noise_panel = NoisePanel()
        self.reg_panel = RegularisationPanel()
        self.solver_panel = SolverPanel()
        self.panels: tuple[ParamPanel, ...] = (
            self.network_panel, self.data_panel, self.noise_panel, self.reg_panel,
            self.solver_panel)
        self.image_grid = ImageGrid()
        self.aux_strip = AuxStrip()
        self.curves = CurvesPanel()
        self.run_table = RunTable(model=self.model.runs)
        self.info: PreparedInfo | None = None  # the problem on screen
        self.good_request: dict[str, Any] | None = None  # last request that prepared fine
        self.shown_result: RunResult | None = None
        self.autorun = autorun
        self.restoring = False  # a session was opened: the next prepare keeps its iterate
        #: Ask about unsaved runs on quit ($LBI_GUI_CONFIRM_QUIT=0: never; tests, scripts).
        self.confirm_quit = os.environ.get("LBI_GUI_CONFIRM_QUIT", "1") != "0"
        self._closing = False
        self._user_guide: UserGuide | None = None
        self._sized = False  # the docks get their proportions when the window first shows
        self.inputs = DataInputs(self)
        self.files = FileCommands(self, self.inputs)
        self.runner = RunView(self, self.files)
        self._build_layout()
        self.actions_ = build_actions(self, self._action_slots())
        for dock in self.docks.values():
            self.actions_.view_menu.addAction(dock.toggleViewAction())
        self.actions_.view_menu.addSeparator()
        self.actions_.view_menu.addAction(self.actions_.reset_layout)
        (self.status_state, self.status_iter, self.status_speed, self.status_time,
         self.status_reason, self.progress) = layout.status_widgets(self.statusBar())
        self.params = Parameters(self, self.inputs, self.runner, request)
        self._wire()
        self._default_state = self.saveState()
        self._restored = restore_layout and layout.restore_layout(self)
        self.files.update_recent_menu()
        self.inputs.show_data_early()
        self._field_shortcuts = FieldShortcuts(self)
        self.update_actions()
        if self.controller.engine_info is not None:  # booted while the window was built
            info = self.controller.engine_info
            QtCore.QTimer.singleShot(0, lambda: self._on_booted(info))
        # A thread backend imports torch in this process: only after the window shows.
        QtCore.QTimer.singleShot(0, self.controller.boot)

    def _action_slots(self) -> dict[str, Slot]:
        r, f = self.runner, self.files
        return {"run": r.run, "pause": r.toggle_pause, "stop": r.stop, "finish": r.finish_now,
                "reset": r.reset, "switch": self.solver_panel.toggle_joint_layerwise,
                "run_all": r.run_all_methods, "open_network": f.open_network_dialog,
                "import_network": self._import_network, "open_image": f.open_image_dialog,
                "fit_prior": self._fit_prior,
                "open_data": f.open_data_dialog, "open_session": f.open_session_dialog,
                "save_session": f.save_session, "save_session_as": f.save_session_as,
                "export": f.export_dialog, "quit": self.close, "about": self.show_about,
                "guide": self.show_user_guide, "reset_layout": self.reset_layout,
                "fit_view": self.image_grid.fit_view}

    # ---- layout ---------------------------------------------------------------------------
    def _build_layout(self) -> None:
        centre = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        centre.addWidget(self.image_grid)
        centre.addWidget(self.aux_strip)
        centre.setStretchFactor(0, 5)
        centre.setStretchFactor(1, 1)
        centre.setSizes([500, AUX_MIN_HEIGHT])
        centre.setCollapsible(0, False)  # the images never vanish behind the strip
        # The strip of auxiliary variables yields its room first: the window's minimum
        # height must stay within a 720-pixel screen with the images at a readable size.
        self.aux_strip.setMinimumHeight(24)
        self.setCentralWidget(centre)
        left, right = QtCore.Qt.DockWidgetArea.LeftDockWidgetArea, \
            QtCore.Qt.DockWidgetArea.RightDockWidgetArea
        parameters = titled_column([("Noise", self.noise_panel),
                                    ("Regularisation", self.reg_panel),
                                    ("Solver", self.solver_panel)])
        self.docks = {
            "network": add_dock(self, "Network", self.network_panel, left, scroll=True),
            "data": add_dock(self, "Data", self.data_panel, left, scroll=True),
            # Parameters keep their full width (sliders beside values); they scroll vertically.
            "parameters": add_dock(self, "Parameters", parameters, right, scroll=True,
                                   max_min_width=None),
            # Curves and runs share the left column with the inputs (tabs): under the images
            # they left a 64×64 picture ~70 pixels at 1280×720; a run raises the curves.
            "curves": add_dock(self, "Curves", self.curves, left),
            "runs": add_dock(self, "Runs", self.run_table, left, scroll=True),
        }
        self.tabifyDockWidget(self.docks["data"], self.docks["network"])
        self.tabifyDockWidget(self.docks["network"], self.docks["curves"])
        self.tabifyDockWidget(self.docks["curves"], self.docks["runs"])
        self.docks["data"].raise_()
        self.setCorner(QtCore.Qt.Corner.BottomLeftCorner, left)
        self.setCorner(QtCore.Qt.Corner.BottomRightCorner, right)
        self.setGeometry(layout.fit_geometry(layout.available_area(self)))

    def _default_dock_sizes(self) -> None:
        """Dock proportions that fit the content (only meaningful once the window is shown)."""
        # the images' centre gets CENTRE_WIDTH first (a 64×64 picture at 3× in two
        # columns), the input column what is left of it, within [its minimum, 480]
        params = self.docks["parameters"].minimumSizeHint().width()
        side = max(DOCK_MAX_MIN_WIDTH, min(480, self.width() - params - CENTRE_WIDTH))
        self.resizeDocks([self.docks["data"], self.docks["parameters"]], [side, 370],
                         QtCore.Qt.Orientation.Horizontal)

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

    def save_layout(self) -> None:
        """Remembers geometry and docks (not a layout that squeezes the images)."""
        layout.save_layout(self, not self.image_grid.isVisible() or self.image_grid.readable())

    def reset_layout(self) -> None:
        """The default docks at proportions that fit this window (View → Reset layout)."""
        self.restoreState(self._default_state)
        for dock in self.docks.values():
            dock.show()
        self.docks["data"].raise_()
        self._default_dock_sizes()
        # Docks settle after the restore is laid out: size them again then.
        QtCore.QTimer.singleShot(0, self._default_dock_sizes)

    @property
    def session_path(self) -> str | None:
        """The session file the runs were saved to or opened from (None: none)."""
        return self.model.session_path

    # ---- parameters (the model's selection; see window/parameters.py) --------------------
    def current_request(self) -> dict[str, Any]:
        return self.params.current_request()

    def sync_request(self) -> None:
        self.params.sync_request()

    def set_request(self, request: dict[str, Any]) -> None:
        self.params.set_request(request)

    def panel_changed(self, key: str) -> None:
        self.params.panel_changed(key)

    def apply_request(self, request: dict[str, Any]) -> None:
        self.params.apply_request(request)

    def flush_changes(self) -> None:
        self.params.flush_changes()

    # ---- wiring ---------------------------------------------------------------------------
    def _wire(self) -> None:
        c, r, f, d = self.controller, self.runner, self.files, self.inputs
        # the auxiliary variable under the mouse reads out on the images' line
        self.aux_strip.hovered.connect(
            lambda text: self.image_grid.readout.setText(text or " "))
        c.booted.connect(self._on_booted)
        c.boot_failed.connect(r.on_boot_failed)
        c.prepared.connect(r.on_prepared)
        c.loading.connect(self._on_loading)
        c.prepare_failed.connect(self._describe_prepared)  # first: a dialog may follow
        c.prepare_failed.connect(f.on_prepare_failed)
        c.view_update.connect(self._on_view_update)
        c.restart_marked.connect(r.on_restart_marked)
        c.run_finished.connect(r.on_run_finished)
        c.run_failed.connect(self._describe_prepared)
        c.run_failed.connect(r.on_run_failed)
        c.queue_done.connect(r.on_queue_done)
        c.queue_progress.connect(r.on_queue_progress)
        c.state_changed.connect(lambda _s: self.update_actions())
        self.network_panel.open_requested.connect(f.open_network_dialog)
        self.solver_panel.prior_requested.connect(f.open_feature_prior_dialog)
        self.data_panel.open_image_requested.connect(f.open_image_dialog)
        self.data_panel.open_data_requested.connect(f.open_data_dialog)
        self.data_panel.splits_needed.connect(d.load_splits)
        self.data_panel.thumbnails_needed.connect(d.load_thumbnails)
        self.run_table.run_all_requested.connect(r.run_all_or_cancel)
        self.run_table.load_requested.connect(f.load_run_parameters)
        self.run_table.table.itemSelectionChanged.connect(r.overlays.overlay_selected)
        self.curves.run_list.checked_changed.connect(r.overlays.overlay_runs)
        for signal in (self.run_table.model_signals.added, self.run_table.model_signals.removed,
                       self.run_table.model_signals.reset):
            signal.connect(r.overlays.runs_changed)
        self.run_table.export_table_requested.connect(f.export_runs_table)
        self.run_table.show_requested.connect(r.show_result)
        self.image_grid.shared_bar.sigLevelsChanged.connect(
            lambda _bar: setattr(self.run_table, "levels", self.image_grid.levels()))

    def _on_booted(self, info: dict[str, Any]) -> None:
        self.network_panel.set_zoo(info.get("zoo", []))
        self.data_panel.set_datasets(info.get("datasets", []))
        self.inputs.load_splits(self.model.selection.request.get("dataset") or "mnist")
        self.solver_panel.set_cuda_available(bool(info.get("cuda")))
        self.set_request(self.model.selection.request)
        if self.autorun:  # a queued run: it prepares the problem itself (one job, not two)
            self.autorun = False
            self.runner.run()
        else:
            self.controller.prepare(self.current_request())

    def _on_loading(self, request: dict[str, Any]) -> None:
        network = str(request.get("network") or "")
        if network and (self.info is None or network != self.info.request.get("network")):
            self.network_panel.show_loading(Path(network).name)

    def _describe_prepared(self, _err: Any = None) -> None:
        """The panel describes the network prepared last again (a new one failed to load)."""
        info = self.info
        if info is not None and self.network_panel.loading:
            self.network_panel.show_network(info.network_name, info.layers, info.card,
                                            info.input_shape, info.output_shape)

    def _on_view_update(self, prog: Progress) -> None:
        self.runner.on_view_update(prog)

    # ---- commands (the collaborators', named here as the window's own) -------------------
    def run(self) -> None:
        self.runner.run()

    def toggle_pause(self) -> None:
        self.runner.toggle_pause()

    def stop(self) -> None:
        self.runner.stop()

    def finish_now(self) -> None:
        self.runner.finish_now()

    def run_all_methods(self) -> None:
        self.runner.run_all_methods()

    def refresh_stale(self) -> None:
        self.runner.refresh_stale()

    def update_actions(self) -> None:
        self.runner.update_actions()

    def open_path(self, path: str) -> None:
        self.files.open_path(path)

    def open_network(self, path: str) -> None:
        self.files.open_network(path)

    def open_data_file(self, key: str, path: str) -> None:
        self.files.open_data_file(key, path)

    def open_session(self, path: str) -> bool:
        return self.files.open_session(path)

    def save_session(self) -> bool:
        return self.files.save_session()

    def save_session_to(self, path: str, confirmed: bool = False) -> bool:
        return self.files.save_session_to(path, confirmed)

    def export_result(self, result: RunResult, paths: dict[str, Path]) -> list[Path]:
        return self.files.export_result(result, paths)

    def export_runs_table(self, path: str | None = None) -> bool:
        return self.files.export_runs_table(path)

    # ---- misc -----------------------------------------------------------------------------
    def show_user_guide(self) -> UserGuide:
        from lbi_gui.dialogs.user_guide import show_user_guide

        self._user_guide = show_user_guide(self, self._user_guide)
        return self._user_guide

    def show_about(self) -> None:
        from lbi_gui.dialogs.about import show_about

        show_about(self)

    def _import_network(self) -> None:
        from lbi_gui.dialogs.import_network import open_import_dialog

        open_import_dialog(self)

    def _fit_prior(self) -> None:
        from lbi_gui.dialogs.fit_prior import open_fit_prior_dialog

        open_fit_prior_dialog(self)

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
        self.params.stop()
        self.save_layout()
        self.controller.shutdown()
        event.accept()
        super().closeEvent(event)
