"""The run table (parameters and final metrics of every finished run) and side-by-side compare.

The runs, their notes, the filter rule, the sort order of values and the CSV belong to the
Qt-free :class:`~lbi_gui.model.RunList`; this widget draws it and follows its events through
:class:`~lbi_gui.model_bridge.RunListSignals`.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from lbi_gui.imaging import error_map, to_view
from lbi_gui.model import RunList, RunResult
from lbi_gui.model.run_list import COLUMNS, matches, sort_key
from lbi_gui.model.run_list import cell_text as _cell
from lbi_gui.model_bridge import RunListSignals
from lbi_gui.widgets.panel import tool_button

#: The one column the user edits (free text; words starting with '#' are tags).
NOTES_COLUMN = COLUMNS.index("notes")
NOTES_TIP = "notes: {}\n(double-click or F2 to edit; words starting with # are tags)"


#: The Run all button's text (while a Run all goes: CANCEL_TEXT).
RUN_ALL_TEXT = "Run all"
CANCEL_TEXT = "Cancel all"


class _SortItem(QtWidgets.QTableWidgetItem):
    """Sorts as the model does (:func:`~lbi_gui.model.run_list.sort_key`): numbers as
    numbers, before text."""

    def _key(self) -> tuple:
        value = self.data(QtCore.Qt.ItemDataRole.UserRole)
        return sort_key(value if isinstance(value, (int, float)) else self.text())

    def __lt__(self, other: QtWidgets.QTableWidgetItem) -> bool:
        if isinstance(other, _SortItem):
            return self._key() < other._key()
        return self.text() < other.text()


EMPTY_COMPARE = "Select two runs in the table to compare them."
#: The smallest side (pixels) of each compared image.
MIN_COMPARE_VIEW = 64
#: Below this width (pixels) the compare pane puts its numbers under the images.
STACK_BELOW = 480


class CompareView(QtWidgets.QWidget):
    """Two runs side by side (same levels) and their difference."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.glw = pg.GraphicsLayoutWidget()
        self.glw.ci.setContentsMargins(2, 2, 2, 2)  # the pane is small: pixels go to images
        self.glw.ci.setSpacing(2)
        self.glw.setBackground("w")
        self.plots: list[pg.PlotItem] = []
        self.items: list[pg.ImageItem] = []
        for col in range(3):
            plot = self.glw.addPlot(row=0, col=col)
            for axis in ("left", "bottom"):
                plot.hideAxis(axis)
            plot.setAspectLocked(True)
            plot.invertY(True)
            plot.hideButtons()
            plot.layout.setContentsMargins(1, 1, 1, 1)
            plot.titleLabel.setMaximumHeight(18)
            item = pg.ImageItem(axisOrder="row-major")
            plot.addItem(item)
            if col:
                plot.setXLink(self.plots[0])
                plot.setYLink(self.plots[0])
            self.plots.append(plot)
            self.items.append(item)
        self.items[2].setLookupTable(pg.colormap.get("CET-D1").getLookupTable(nPts=256))
        self.text = QtWidgets.QLabel(EMPTY_COMPARE)
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text.setAlignment(QtCore.Qt.AlignmentFlag.AlignTop | QtCore.Qt.AlignmentFlag.AlignLeft)
        # The numbers scroll: a long table must never push the images (or the dock, and with
        # it the central views) below a readable size.
        numbers = QtWidgets.QScrollArea()
        numbers.setWidgetResizable(True)
        numbers.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        numbers.setWidget(self.text)
        numbers.setMinimumWidth(110)
        numbers.setMaximumWidth(360)
        numbers.setMinimumHeight(40)
        self.glw.setMinimumSize(150, MIN_COMPARE_VIEW + 36)  # + titles
        self.numbers = numbers
        self.box = QtWidgets.QBoxLayout(QtWidgets.QBoxLayout.Direction.LeftToRight, self)
        self.box.setContentsMargins(0, 0, 0, 0)
        # The images are height-bound in a short pane: width beyond that goes to the numbers.
        self.box.addWidget(self.glw, 1)
        self.box.addWidget(numbers, 1)
        self.shown: tuple[int, int] | None = None

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:
        """Numbers beside the images in a wide pane, under them in a narrow one (a dock
        column), so the three images keep their width."""
        super().resizeEvent(event)
        narrow = event.size().width() < STACK_BELOW
        direction = QtWidgets.QBoxLayout.Direction
        self.box.setDirection(direction.TopToBottom if narrow else direction.LeftToRight)
        self.numbers.setMaximumWidth(16777215 if narrow else 360)

    def clear(self) -> None:
        """Back to the empty pane (no images, no numbers)."""
        for item, plot in zip(self.items, self.plots, strict=True):
            item.clear()
            plot.setTitle("")
        self.text.setText(EMPTY_COMPARE)
        self.shown = None

    def compare(self, a: RunResult, b: RunResult, levels: tuple[float, float]) -> None:
        for item, run in zip(self.items, (a, b), strict=False):
            item.setImage(to_view(run.x_display), levels=levels, autoLevels=False)
        diff = error_map(b.x_display, a.x_display)
        if diff is not None:
            m = float(np.max(np.abs(diff))) or 1e-3
            self.items[2].setImage(diff, levels=(-m, m), autoLevels=False)
        else:
            self.items[2].clear()
        self.plots[0].setTitle(f"#{a.run_id}", size="9pt")
        self.plots[1].setTitle(f"#{b.run_id}", size="9pt")
        self.plots[2].setTitle(f"#{b.run_id} − #{a.run_id}", size="9pt")
        rows = [f"<tr><td>method</td><td align=right>{a.table_row()['method']}</td>"
                f"<td align=right>{b.table_row()['method']}</td></tr>",
                f"<tr><td>α</td><td align=right>{_cell(a.alpha_used)}</td>"
                f"<td align=right>{_cell(b.alpha_used)}</td></tr>",
                f"<tr><td>α rule</td><td align=right>{a.alpha_rule}</td>"
                f"<td align=right>{b.alpha_rule}</td></tr>"]
        for key in ("PSNR", "SSIM", "discrepancy", "objective", "iterations", "time [s]"):
            va, vb = a.table_row()[key], b.table_row()[key]
            rows.append(f"<tr><td>{key}</td><td align=right>{_cell(va)}</td>"
                        f"<td align=right>{_cell(vb)}</td></tr>")
        self.text.setText(f"<table cellspacing=6><tr><th></th><th>#{a.run_id}</th>"
                          f"<th>#{b.run_id}</th></tr>{''.join(rows)}</table>")
        self.plots[0].autoRange(padding=0.02)
        self.shown = (a.run_id, b.run_id)


class RunTable(QtWidgets.QWidget):
    """Every finished run; select one to show it, two to compare."""

    show_requested = QtCore.Signal(object)  # RunResult
    run_all_requested = QtCore.Signal()
    load_requested = QtCore.Signal(object)  # RunResult: put its parameters on screen
    export_table_requested = QtCore.Signal()
    notes_changed = QtCore.Signal(object)  # RunResult whose note the user edited

    def __init__(self, parent: QtWidgets.QWidget | None = None,
                 model: RunList | None = None) -> None:
        super().__init__(parent)
        self.model = model if model is not None else RunList()
        self.model_signals = RunListSignals(self.model, self)
        self.table = QtWidgets.QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        # only the notes cells are editable (their items carry ItemIsEditable)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.DoubleClicked
                                   | QtWidgets.QAbstractItemView.EditTrigger.EditKeyPressed)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, QtCore.Qt.SortOrder.AscendingOrder)  # oldest run first
        self.table.setAlternatingRowColors(True)
        self.compare_view = CompareView()
        self.run_all = tool_button(RUN_ALL_TEXT)
        self.run_all.setToolTip("Run every method on the current sample, one after another")
        self.remove = tool_button("Delete")
        self.remove.setToolTip("Remove the selected runs from the table (Delete)")
        self.load = tool_button("Load params")
        self.load.setToolTip("Put the selected run's parameters on screen (to repeat or vary "
                             "it)")
        self.export_table = tool_button("CSV…")
        self.export_table.setToolTip("Save the table (every run, all columns) as CSV")
        self.filter = QtWidgets.QLineEdit()
        self.filter.setPlaceholderText("Filter runs…")
        self.filter.setToolTip("Show only runs with every word in some column (e.g. joint, "
                               "circle, tv, or a tag from the notes such as #baseline)")
        self.filter.setClearButtonEnabled(True)
        buttons = QtWidgets.QHBoxLayout()
        buttons.addWidget(self.run_all)
        buttons.addWidget(self.load)
        buttons.addWidget(self.remove)
        buttons.addWidget(self.export_table)
        buttons.addStretch(1)
        top = QtWidgets.QWidget()
        top_lay = QtWidgets.QVBoxLayout(top)
        top_lay.setContentsMargins(0, 0, 0, 0)
        top_lay.addLayout(buttons)
        top_lay.addWidget(self.filter)  # its own row: the dock stays narrow on small screens
        top_lay.addWidget(self.table)
        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        split.addWidget(top)
        split.addWidget(self.compare_view)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        split.setCollapsible(0, False)
        split.setCollapsible(1, False)
        self.table.setMinimumHeight(150)  # header and six rows; more scroll
        self.table.verticalHeader().setDefaultSectionSize(22)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(split)
        self.levels: tuple[float, float] = (0.0, 1.0)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        self.table.itemDoubleClicked.connect(self._double_clicked)
        self.table.itemChanged.connect(self._item_changed)
        self._filling = False  # rows being built: their itemChanged is not a user edit
        self.run_all.clicked.connect(self.run_all_requested)
        self.remove.clicked.connect(self.remove_selected)
        self.load.clicked.connect(self._load_selected)
        self.export_table.clicked.connect(self.export_table_requested)
        self.filter.textChanged.connect(self.apply_filter)
        delete = QtGui.QShortcut(QtGui.QKeySequence(QtGui.QKeySequence.StandardKey.Delete),
                                 self.table)
        delete.setContext(QtCore.Qt.ShortcutContext.WidgetShortcut)
        delete.activated.connect(self.remove_selected)
        self.model_signals.added.connect(self._append_row)
        self.model_signals.removed.connect(self._rebuild)
        self.model_signals.reset.connect(self._rebuild)
        self.model_signals.note_changed.connect(self._show_note)
        self._rebuild()

    @property
    def runs(self) -> list[RunResult]:
        """The model's runs, oldest first (a copy)."""
        return self.model.runs

    def add(self, run: RunResult) -> None:
        self.model.add(run)  # the model's "added" event appends the row

    def _append_row(self, run: RunResult) -> None:
        sorting = self.table.isSortingEnabled()
        self.table.setSortingEnabled(False)
        self._filling = True
        r = self.table.rowCount()
        self.table.insertRow(r)
        editable = QtCore.Qt.ItemFlag.ItemIsEditable
        for c, (key, value) in enumerate(run.table_row().items()):
            if c == NOTES_COLUMN:
                item = _SortItem(run.notes)
                item.setData(QtCore.Qt.ItemDataRole.UserRole, run.notes)
                item.setToolTip(NOTES_TIP.format(run.notes))
                item.setFlags(item.flags() | editable)
            else:
                item = _SortItem(_cell(value))
                item.setData(QtCore.Qt.ItemDataRole.UserRole,
                             value if isinstance(value, (int, float)) else str(value))
                item.setToolTip(f"{key}: {_cell(value)}")
                item.setFlags(item.flags() & ~editable)
            if c == 0:
                item.setData(QtCore.Qt.ItemDataRole.UserRole + 1, run.run_id)
            self.table.setItem(r, c, item)
        self._filling = False
        self.table.setSortingEnabled(sorting)
        self.table.resizeColumnsToContents()
        self.apply_filter(self.filter.text())

    def set_runs(self, runs: list[RunResult]) -> None:
        self.model.replace_all(runs)

    def _rebuild(self, _runs: object = None) -> None:
        self.table.setRowCount(0)
        for run in self.model:
            self._append_row(run)
        shown = self.compare_view.shown
        if shown is not None and any(self.model.get(i) is None for i in shown):
            self.compare_view.clear()  # never the numbers of runs that are gone

    def _row_id(self, row: int) -> int | None:
        item = self.table.item(row, 0)
        return item.data(QtCore.Qt.ItemDataRole.UserRole + 1) if item else None

    def selected(self) -> list[RunResult]:
        ids = [self._row_id(index.row()) for index in self.table.selectionModel().selectedRows(0)]
        runs = [self.model.get(i) for i in sorted(i for i in ids if i is not None)]
        return [r for r in runs if r is not None]

    def select_ids(self, ids: list[int]) -> None:
        self.table.clearSelection()
        mode = QtCore.QItemSelectionModel.SelectionFlag.Select | \
            QtCore.QItemSelectionModel.SelectionFlag.Rows
        for r in range(self.table.rowCount()):
            if self._row_id(r) in ids:
                self.table.selectionModel().select(self.table.model().index(r, 0), mode)

    def _selection_changed(self) -> None:
        sel = self.selected()
        if len(sel) == 2:
            self.compare_view.compare(sel[0], sel[1], self.levels)

    def _double_clicked(self, item: QtWidgets.QTableWidgetItem) -> None:
        if item.column() == NOTES_COLUMN:
            return  # that double-click opens the note's editor
        run = self.model.get(self._row_id(item.row()))
        if run is not None:
            self.show_requested.emit(run)

    def _item_changed(self, item: QtWidgets.QTableWidgetItem) -> None:
        """A note edited in its cell goes to the model (which tidies it to one line)."""
        if self._filling or item.column() != NOTES_COLUMN:
            return
        run_id = self._row_id(item.row())
        if run_id is not None:
            self.model.set_note(run_id, item.text())  # "note_changed" redraws the cell

    def _show_note(self, run: RunResult) -> None:
        """The model changed a note: show it, re-filter, tell the window."""
        row = next((r for r in range(self.table.rowCount()) if self._row_id(r) == run.run_id),
                   None)
        item = self.table.item(row, NOTES_COLUMN) if row is not None else None
        if item is not None:
            self._filling = True  # the updates below change the item again
            sorting = self.table.isSortingEnabled()
            self.table.setSortingEnabled(False)  # the row must not move under these updates
            item.setText(run.notes)
            item.setData(QtCore.Qt.ItemDataRole.UserRole, run.notes)
            item.setToolTip(NOTES_TIP.format(run.notes))
            self.table.setSortingEnabled(sorting)
            self._filling = False
        self.apply_filter(self.filter.text())
        self.notes_changed.emit(run)

    def apply_filter(self, text: str) -> None:
        """Hide the rows the model's filter rule (:func:`~lbi_gui.model.run_list.matches`)
        drops: every word of ``text`` must be in some cell, so "#baseline joint" keeps the
        joint runs tagged #baseline."""
        for r in range(self.table.rowCount()):
            run = self.model.get(self._row_id(r))
            self.table.setRowHidden(r, run is None or not matches(run, text))

    def table_csv(self) -> str:
        """Every run (filtered or not) with every column, in the table's current order."""
        ids = (self._row_id(r) for r in range(self.table.rowCount()))
        return self.model.csv(i for i in ids if i is not None)

    def _load_selected(self) -> None:
        sel = self.selected()
        if sel:
            self.load_requested.emit(sel[-1])

    def remove_selected(self) -> None:
        self.model.remove(r.run_id for r in self.selected())
