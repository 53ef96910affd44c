"""What the window's collaborators (runs, files, data) may use of the main window.

Why a Protocol: the collaborators are handed the window as an explicit reference, and this
lists, in one place and checked by mypy, every widget, piece of state and command they reach
through it. The window satisfies it structurally; the collaborators import this module, not
``main_window`` (which imports them), so there is no import cycle.
"""

from __future__ import annotations

from typing import Any, Protocol

from PySide6 import QtWidgets

from lbi_gui.engine.messages import PreparedInfo
from lbi_gui.model import AppModel
from lbi_gui.model.runs import RunResult
from lbi_gui.widgets.aux_strip import AuxStrip
from lbi_gui.widgets.curves import CurvesPanel
from lbi_gui.widgets.data_panel import DataPanel
from lbi_gui.widgets.image_grid import ImageGrid
from lbi_gui.widgets.network_panel import NetworkPanel
from lbi_gui.widgets.noise_panel import NoisePanel
from lbi_gui.widgets.panel import ParamPanel
from lbi_gui.widgets.regularisation_panel import RegularisationPanel
from lbi_gui.widgets.run_table import RunTable
from lbi_gui.widgets.solver_panel import SolverPanel
from lbi_gui.window.actions import WindowActions
from lbi_gui.window.controller import RunController


class WindowHost(Protocol):
    """The main window as its collaborators see it."""

    controller: RunController
    model: AppModel
    network_panel: NetworkPanel
    data_panel: DataPanel
    noise_panel: NoisePanel
    reg_panel: RegularisationPanel
    solver_panel: SolverPanel
    panels: tuple[ParamPanel, ...]
    image_grid: ImageGrid
    aux_strip: AuxStrip
    curves: CurvesPanel
    run_table: RunTable
    docks: dict[str, QtWidgets.QDockWidget]
    actions_: WindowActions
    status_state: QtWidgets.QLabel
    status_iter: QtWidgets.QLabel
    status_speed: QtWidgets.QLabel
    status_time: QtWidgets.QLabel
    status_reason: QtWidgets.QLabel
    progress: QtWidgets.QProgressBar
    #: The prepared problem on screen (None before the first prepare).
    info: PreparedInfo | None
    #: The last request that prepared fine (what a failed one goes back to).
    good_request: dict[str, Any] | None
    #: The finished run whose iterate and curves are on screen.
    shown_result: RunResult | None
    #: Run as soon as the engine is ready (a run asked for while it loads).
    autorun: bool
    #: A session was just opened: the next prepare keeps its restored iterate.
    restoring: bool

    # Qt's own (the dialogs' parent is ``window()``, the top-level widget itself).
    def window(self) -> QtWidgets.QWidget: ...
    def statusBar(self) -> QtWidgets.QStatusBar: ...
    def setWindowTitle(self, title: str) -> None: ...

    # ---- the window's parameters and commands ---------------------------------------------
    def current_request(self) -> dict[str, Any]: ...
    def set_request(self, request: dict[str, Any]) -> None: ...
    def sync_request(self) -> None: ...
    def flush_changes(self) -> None: ...
    def apply_request(self, request: dict[str, Any]) -> None: ...
    def panel_changed(self, key: str) -> None: ...
    def may_discard(self, action: str) -> bool: ...
    def update_actions(self) -> None: ...
