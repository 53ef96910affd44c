"""A session's view put back as the user saw it (a collaborator of the file commands)."""

from __future__ import annotations

import numpy as np
from PySide6 import QtCore, QtWidgets

from lbi_engine.results.verdict import finite_number
from lbi_gui.model.runs import RunResult
from lbi_gui.model.session import SessionState
from lbi_gui.widgets.image_grid import ImageGrid
from lbi_gui.widgets.image_tools import LUTS
from lbi_gui.widgets.regularisation_panel import RegularisationPanel


def restore_view(state: SessionState, run: RunResult | None, image_grid: ImageGrid,
                 reg_panel: RegularisationPanel, reason: QtWidgets.QLabel) -> None:
    """What the user saw: the iterate with its header (``run``: the run on screen), the α a
    search chose, the colour map, the whole image in view, and the shown run's reason."""
    shown = state.shown
    own = run is not None and shown is not None and np.array_equal(
        np.asarray(shown), np.asarray(run.x_display))
    if own and run is not None:
        image_grid.set_iterate(shown, run.iterations, finite_number(run.metrics.psnr))
        chosen = finite_number(run.metrics.alpha)
        if run.alpha_rule != "typed" and chosen:
            reg_panel.show_chosen_alpha(chosen)
        reason.setText(f"run #{run.run_id}: {run.stop_reason}")
    else:
        image_grid.set_iterate(shown)
    if state.gui.get("colour_map") in {name for _label, name in LUTS}:
        image_grid.tools.set_lut(str(state.gui["colour_map"]))
    QtCore.QTimer.singleShot(0, image_grid.fit_view)
