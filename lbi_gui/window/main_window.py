"""The main window: panels in docks, images in the centre, curves and runs below.

The window lays out the widgets and wires its collaborators. The request and the runs are
:class:`~lbi_gui.model.AppModel`'s; what is on screen (problem, run shown, queued run) is
:class:`~lbi_gui.model.ViewState`'s, one event per field. Each collaborator gets that
state, the widgets it drives and the few commands it needs, never the window: RunView
(runs and their display, window/run.py), Parameters (the panels and the request),
FileCommands (networks, data, sessions), ExportCommands, DataInputs (the data's sources)
and ActionStates (which actions are enabled). Numbers come from the worker through
:class:`~lbi_gui.window.controller.RunController`.
"""

from __future__ import annotations

import functools
from typing import Any

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from lbi_gui import gui_gc
from lbi_gui.dialogs.user_guide import UserGuide
from lbi_gui.engine.messages import PreparedInfo
from lbi_gui.model import AppModel
from lbi_gui.model.view_state import ViewState
from lbi_gui.params import default_request
from lbi_gui.widgets.aux_strip import AuxStrip
from lbi_gui.widgets.curves import CurvesPanel
from lbi_gui.widgets.data_panel import DataPanel
from lbi_gui.widgets.image_grid import ImageGrid
from lbi_gui.widgets.network_panel import NetworkPanel
from lbi_gui.widgets.noise_panel import NoisePanel
from lbi_gui.widgets.regularisation_panel import RegularisationPanel
from lbi_gui.widgets.run_table import RunTable
from lbi_gui.widgets.solver_panel import SolverPanel
from lbi_gui.window import layout
from lbi_gui.window.actions import ActionStates, Slot, build_actions
from lbi_gui.window.controller import RunController
from lbi_gui.window.data import DataInputs, FieldShortcuts
from lbi_gui.window.exports import ExportCommands
from lbi_gui.window.files import FileCommands
from lbi_gui.window.parameters import Parameters
from lbi_gui.window.parts import Panels, Views
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
        self.controller = c = controller or RunController(self)
        self.controller.setParent(self)
        #: The Qt-free application state: the current request, the runs, the session file.
        self.model = AppModel({**default_request(), **(request or {})})
        #: What is on screen besides them (the prepared problem, the run shown, …).
        self.view = view = ViewState[PreparedInfo](autorun=autorun)
        self.panels = panels = Panels(NetworkPanel(), DataPanel(), NoisePanel(),
                                      RegularisationPanel(), SolverPanel())
        self.network_panel, self.data_panel, self.noise_panel = \
            panels.network, panels.data, panels.noise
        self.reg_panel, self.solver_panel = panels.reg, panels.solver
        self.views = views = Views(ImageGrid(), AuxStrip(), CurvesPanel(),
                                   RunTable(model=self.model.runs))
        self.image_grid, self.aux_strip = views.image_grid, views.aux_strip
        self.curves, self.run_table = views.curves, views.run_table
        self._user_guide: UserGuide | None = None
        self._closing = False
        self._sized = False  # the docks get their proportions when the window first shows
        self.docks = layout.build_docks(self, self.panels, self.views)
        self._size_docks = functools.partial(layout.default_dock_sizes, self, self.docks)
        self.status = status = layout.status_widgets(self.statusBar())
        recent_menu = QtWidgets.QMenu("Open &recent", self)
        self.inputs = DataInputs(view, self.model.selection, c, panels, views.image_grid,
                                 status.bar, self)
        self.inputs.show_lists()  # before the panels show the request: its items exist
        self.params = Parameters(self.model.selection, panels, self.inputs, c, status.bar)
        self.runner = RunView(view, self.model, c, panels, views, status, self.docks,
                              self.params.flush_changes, self)
        self.files = FileCommands(view, self.model, c, self.params, self.inputs, panels, views,
                                  status, self.docks["network"], recent_menu,
                                  self.setWindowTitle, self)
        self.exports = ExportCommands(view, c, views, status.bar, self)
        self.actions_ = build_actions(self, self._action_slots(), recent_menu,
                                      self.docks.values())
        self.action_states = ActionStates(self.actions_, c, view, self.solver_panel.switch,
                                          self.run_table, status.state)
        self._wire()
        self._default_state = self.saveState()
        self._restored = restore_layout and layout.restore_layout(self)
        self.files.update_recent_menu()
        self.inputs.preview_truth()
        self._field_shortcuts = FieldShortcuts(self)
        self.action_states.update()
        if c.engine_info is not None:  # booted while the window was built
            info = c.engine_info
            QtCore.QTimer.singleShot(0, lambda: self._on_booted(info))
        # A thread backend imports torch in this process: only after the window shows.
        QtCore.QTimer.singleShot(0, c.boot)

    def _action_slots(self) -> dict[str, Slot]:
        r, f = self.runner, self.files
        return {"run": r.run, "pause": r.toggle_pause, "stop": r.stop, "finish": r.finish_now,
                "reset": r.reset, "switch": self.solver_panel.toggle_joint_layerwise,
                "run_all": r.run_all_methods, "open_network": f.open_network_dialog,
                "import_network": self._import_network, "open_image": f.open_image_dialog,
                "fit_prior": self._fit_prior,
                "open_data": f.open_data_dialog, "open_session": f.open_session_dialog,
                "save_session": f.save_session, "save_session_as": f.save_session_as,
                "export": self.exports.export_dialog, "quit": self.close,
                "about": self.show_about, "guide": self.show_user_guide,
                "reset_layout": self.reset_layout, "fit_view": self.image_grid.fit_view}

    # ---- layout ---------------------------------------------------------------------------
    def showEvent(self, event: QtGui.QShowEvent) -> None:
        super().showEvent(event)
        if not self._sized:
            self._sized = True
            if not self._restored:
                QtCore.QTimer.singleShot(0, self._size_docks)
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
        self._size_docks()
        # Docks settle after the restore is laid out: size them again then.
        QtCore.QTimer.singleShot(0, self._size_docks)

    # ---- wiring ---------------------------------------------------------------------------
    def _wire(self) -> None:
        c, r, f, d, a = self.controller, self.runner, self.files, self.inputs, self.action_states
        # the auxiliary variable under the mouse reads out on the images' line
        self.aux_strip.hovered.connect(
            lambda text: self.image_grid.readout.setText(text or " "))
        c.booted.connect(self._on_booted)
        c.boot_failed.connect(r.on_boot_failed)
        c.prepared.connect(d.on_prepared)  # first: the data panel shows what was prepared
        c.prepared.connect(r.on_prepared)
        c.loading.connect(r.on_loading)
        c.prepare_failed.connect(r.describe_prepared)  # first: a dialog may follow
        c.prepare_failed.connect(f.on_prepare_failed)
        c.view_update.connect(r.on_view_update)
        c.restart_marked.connect(r.on_restart_marked)
        c.run_finished.connect(r.on_run_finished)
        c.run_failed.connect(r.describe_prepared)
        c.run_failed.connect(r.on_run_failed)
        c.queue_done.connect(r.on_queue_done)
        c.queue_progress.connect(r.on_queue_progress)
        # after the run view's own slots: the actions show what they left
        for signal in (c.state_changed, c.prepared, c.run_finished, c.run_failed,
                       c.queue_progress, c.queue_done):
            signal.connect(lambda *_args: a.update())
        self.params.events.applied.connect(r.refresh_stale)
        self.network_panel.open_requested.connect(f.open_network_dialog)
        self.solver_panel.prior_requested.connect(f.open_feature_prior_dialog)
        self.data_panel.open_image_requested.connect(f.open_image_dialog)
        self.data_panel.open_data_requested.connect(f.open_data_dialog)
        self.run_table.run_all_requested.connect(r.run_all_or_cancel)
        self.run_table.load_requested.connect(f.load_run_parameters)
        self.run_table.table.itemSelectionChanged.connect(r.overlays.overlay_selected)
        self.curves.run_list.checked_changed.connect(r.overlays.overlay_runs)
        for signal in (self.run_table.model_signals.added, self.run_table.model_signals.removed,
                       self.run_table.model_signals.reset):
            signal.connect(r.overlays.runs_changed)
            signal.connect(lambda *_args: a.update())  # export needs a run
        self.run_table.export_table_requested.connect(self.exports.export_runs_table)
        self.run_table.show_requested.connect(r.show_result)
        self.image_grid.shared_bar.sigLevelsChanged.connect(
            lambda _bar: setattr(self.run_table, "levels", self.image_grid.levels()))

    def _on_booted(self, info: dict[str, Any]) -> None:
        self.network_panel.set_zoo(info.get("zoo", []))
        self.data_panel.set_datasets(info.get("datasets", []))
        self.inputs.load_splits(self.model.selection.request.get("dataset") or "mnist")
        self.solver_panel.set_cuda_available(bool(info.get("cuda")))
        self.params.set_request(self.model.selection.request)
        if self.view.autorun:  # a queued run: it prepares the problem itself (one job, not two)
            self.view.autorun = False
            self.runner.run()
        else:
            self.controller.prepare(self.params.current_request())

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
            self.files.open_path(paths[0])

    def closeEvent(self, event: QtGui.QCloseEvent) -> None:
        """Ask about unsaved runs and a live run, then stop a running solve cleanly (cancel,
        quit, wait)."""
        if not self._closing and not self.files.may_discard("quitting"):
            event.ignore()
            return
        self._closing = True
        self.params.stop()
        self.save_layout()
        self.controller.shutdown()
        event.accept()
        super().closeEvent(event)
