"""The window's widgets in typed groups, as its collaborators are handed them.

Why groups: a collaborator is constructed from the view state and the widgets it draws on,
never from the window; these name those widgets once (the parameter panels, the views of a
run, the status bar's fields) so that a constructor's signature stays readable.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from PySide6 import QtWidgets

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


@dataclass(frozen=True)
class Panels:
    """The parameter panels: together they show (and edit) the whole request."""

    network: NetworkPanel
    data: DataPanel
    noise: NoisePanel
    reg: RegularisationPanel
    solver: SolverPanel

    def __iter__(self) -> Iterator[ParamPanel]:
        return iter(self.all)

    @property
    def all(self) -> tuple[ParamPanel, ...]:
        return (self.network, self.data, self.noise, self.reg, self.solver)


@dataclass(frozen=True)
class Views:
    """What shows a run: the images, the auxiliary variables, the curves, the runs table."""

    image_grid: ImageGrid
    aux_strip: AuxStrip
    curves: CurvesPanel
    run_table: RunTable


@dataclass(frozen=True)
class StatusWidgets:
    """The status bar and its permanent fields: state, iteration, speed, time, why the run
    stopped, and the progress bar."""

    bar: QtWidgets.QStatusBar
    state: QtWidgets.QLabel
    iteration: QtWidgets.QLabel
    speed: QtWidgets.QLabel
    time: QtWidgets.QLabel
    reason: QtWidgets.QLabel
    progress: QtWidgets.QProgressBar
