"""Finished runs drawn over the current curves: the Runs table's selection and the curves'
run list (checkbox and colour per run) decide them together (a collaborator of the run
view)."""

from __future__ import annotations

from lbi_gui.widgets.curves import CurvesPanel
from lbi_gui.widgets.run_table import RunTable


class RunOverlays:
    """Which finished runs the curves overlay; the run list is their legend."""

    def __init__(self, run_table: RunTable, curves: CurvesPanel) -> None:
        self.run_table = run_table
        self.curves = curves

    def overlay_selected(self) -> None:
        """Two or more runs selected in the table: their curves overlaid (checked in the
        curves' run list); one or none selected leaves the list's checks as they are."""
        selected = self.run_table.selected()
        if len(selected) >= 2:
            self.overlay_runs([r.run_id for r in selected])

    def overlay_runs(self, run_ids: list[int]) -> None:
        """Draw exactly the finished runs ``run_ids`` over the current curves; the run list
        checks and colours them (its rows are the legend)."""
        runs = [r for r in self.run_table.runs if r.run_id in run_ids]
        self.curves.overlay.set_runs(runs)
        listed = self.curves.run_list
        listed.set_runs(self.run_table.runs)
        listed.set_checked([r.run_id for r in runs])
        listed.show_colours(self.curves.overlay.colour_of)

    def runs_changed(self, *_args: object) -> None:
        """Runs added, removed or replaced: the run list offers those that exist, and the
        overlay keeps only those."""
        self.overlay_runs(self.curves.run_list.checked_ids())
