"""Exports for the main window (its collaborator): a finished run's files, the runs table."""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtWidgets

from lbi_engine.errors import LbiError
from lbi_engine.io import atomic_write_text
from lbi_gui import export as exporter
from lbi_gui.dialogs.messages import confirm_overwrite, show_error
from lbi_gui.engine.messages import PreparedInfo
from lbi_gui.model.runs import RunResult
from lbi_gui.model.view_state import ViewState
from lbi_gui.settings import last_dir, remember_dir
from lbi_gui.window.controller import RunController
from lbi_gui.window.parts import Views


class ExportCommands:
    """Export… (a run's images, curves, plots and result.json) and the runs table as CSV;
    asks before replacing files and writes nothing on failure."""

    def __init__(self, view: ViewState[PreparedInfo], controller: RunController, views: Views,
                 status_bar: QtWidgets.QStatusBar, parent: QtWidgets.QWidget) -> None:
        self.view, self.controller = view, controller
        self.image_grid, self.curves, self.run_table = views.image_grid, views.curves, \
            views.run_table
        self.status_bar = status_bar
        #: The parent of the dialogs opened here.
        self.parent = parent

    def export_target(self) -> RunResult | None:
        """The run to export: the one selected in the table, else the one on screen."""
        selected = self.run_table.selected()
        if len(selected) == 1:
            return selected[0]
        return self.view.shown_result or (self.run_table.runs[-1] if self.run_table.runs else None)

    def export_dialog(self) -> None:
        from lbi_gui.dialogs.export_dialog import ExportDialog

        result = self.export_target()
        if result is None:
            show_error(self.parent, "Nothing to export yet", "No run has finished.",
                       fix="Run an inversion (Ctrl+R), or press 'Finish now' during a run.")
            return
        # the method that ran (auto resolves to one-layer or joint), as result.json names it
        method = result.metrics.method_run or result.request.get("method")
        stem = f"lbi_run{result.run_id}_{method}"
        dialog = ExportDialog(self.parent, last_dir("export"), stem, result.label)
        if dialog.exec() != QtWidgets.QDialog.DialogCode.Accepted:
            return
        remember_dir("export", dialog.folder.text())
        self.export_result(result, dialog.paths())

    def export_runs_table(self, path: str | None = None) -> bool:
        """The runs table as CSV (asks for a file unless ``path``; asks before replacing)."""
        if path is None:
            path, _ = QtWidgets.QFileDialog.getSaveFileName(
                self.parent, "Export the runs table",
                str(Path(last_dir("export")) / "runs.csv"), "CSV (*.csv)")
            if not path:
                return False
            confirmed = True  # the file dialog asked about replacing
        else:
            confirmed = not Path(path).exists()
        if not confirmed and not confirm_overwrite(self.parent, [path]):
            return False
        try:
            atomic_write_text(Path(path), self.run_table.table_csv())
        except OSError as exc:
            show_error(self.parent, "Could not export the table", f"{path}: {exc}",
                       fix="Choose a folder you can write to.")
            return False
        remember_dir("export", path)
        self.status_bar.showMessage(f"Runs table saved to {path}", 4000)
        return True

    def export_result(self, result: RunResult, paths: dict[str, Path]) -> list[Path]:
        """Write ``paths``; asks once before replacing existing files, else writes nothing."""
        existing = [str(p) for p in paths.values() if p.exists()]
        if existing and not confirm_overwrite(self.parent, existing):
            self.status_bar.showMessage("Export cancelled: nothing was written", 4000)
            return []
        if self.curves.store is not result.curves and not self.controller.running:
            # the plot exported is what is on screen: this run's curves (and the runs
            # checked in the run list, named in the legend), never another run's
            self.curves.set_run(result.curves)
        try:
            written = exporter.export_files(paths, result, levels=self.image_grid.levels(),
                                            plot_item=self.curves.export_item(),
                                            overwrite=bool(existing))
        except (OSError, LbiError, ValueError, ImportError) as exc:
            show_error(self.parent, "Export failed", str(exc),
                       fix="Choose a folder you can write to. Nothing was changed: the files "
                           "are staged and only moved in once every one was written.")
            return []
        self.status_bar.showMessage(f"Exported {len(written)} files", 5000)
        return written
