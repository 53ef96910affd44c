"""The curves' run list: which finished runs are drawn over the live curves, each with a
checkbox and its colour (TensorBoard's run selector), and an always-visible legend.

Why a list: runs overlaid by selecting rows in the Runs table stayed on every later plot,
unnamed once the legend was clipped. Here every drawn run is named in its colour, checked
runs are exactly those drawn (and exported), and the list empties when the network changes.
"""

from __future__ import annotations

from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

#: Rows shown before the list scrolls (the plots keep the room).
VISIBLE_ROWS = 3


def _swatch(colour: str | None) -> QtGui.QIcon:
    pix = QtGui.QPixmap(14, 8)
    pix.fill(QtGui.QColor(colour) if colour else QtCore.Qt.GlobalColor.transparent)
    return QtGui.QIcon(pix)


class CurveRunList(QtWidgets.QListWidget):
    """One checkable row per finished run; ``checked_changed(run_ids)`` when the user
    (un)checks one."""

    checked_changed = QtCore.Signal(list)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setToolTip("Check runs to draw their objective, PSNR and discrepancy over the "
                        "current curves (each in the colour shown)")
        row = max(16, self.fontMetrics().height() + 4)
        self.setMaximumHeight(VISIBLE_ROWS * row + 6)
        self.setMinimumHeight(row + 6)
        self.current = QtWidgets.QListWidgetItem("current run: the plots' own colours")
        self.current.setFlags(QtCore.Qt.ItemFlag.ItemIsEnabled)
        self.addItem(self.current)
        self._quiet = False
        self.itemChanged.connect(self._changed)

    def set_runs(self, runs: list[Any]) -> None:
        """The finished runs to offer (RunResult objects, oldest first); checks are kept."""
        checked = set(self.checked_ids())
        self._quiet = True
        while self.count() > 1:
            self.takeItem(1)
        for run in runs:
            item = QtWidgets.QListWidgetItem(run.label)
            item.setData(QtCore.Qt.ItemDataRole.UserRole, int(run.run_id))
            item.setFlags(QtCore.Qt.ItemFlag.ItemIsEnabled
                          | QtCore.Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(QtCore.Qt.CheckState.Checked if run.run_id in checked
                               else QtCore.Qt.CheckState.Unchecked)
            self.addItem(item)
        self._quiet = False

    def checked_ids(self) -> list[int]:
        return [int(self.item(i).data(QtCore.Qt.ItemDataRole.UserRole))
                for i in range(1, self.count())
                if self.item(i).checkState() == QtCore.Qt.CheckState.Checked]

    def set_checked(self, run_ids: list[int]) -> None:
        """Check exactly ``run_ids`` (no signal: the caller draws them)."""
        self._quiet = True
        for i in range(1, self.count()):
            item = self.item(i)
            on = int(item.data(QtCore.Qt.ItemDataRole.UserRole)) in run_ids
            item.setCheckState(QtCore.Qt.CheckState.Checked if on
                               else QtCore.Qt.CheckState.Unchecked)
        self._quiet = False

    def show_colours(self, colour_of: Any) -> None:
        """Each row's swatch: ``colour_of(run_id)`` (None: not drawn)."""
        self._quiet = True  # an icon change is an itemChanged too
        for i in range(1, self.count()):
            item = self.item(i)
            item.setIcon(_swatch(colour_of(int(item.data(QtCore.Qt.ItemDataRole.UserRole)))))
        self._quiet = False

    def _changed(self, _item: QtWidgets.QListWidgetItem) -> None:
        if not self._quiet:
            self.checked_changed.emit(self.checked_ids())
