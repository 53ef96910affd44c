"""The run table follows its Qt-free model through the Qt bridge (and sorts as it does)."""

from __future__ import annotations

import gc

from PySide6 import QtCore

from lbi_gui.model import RunList
from lbi_gui.model.run_list import COLUMNS
from lbi_gui.model_bridge import RunListSignals
from lbi_gui.widgets.run_table import NOTES_COLUMN, RunTable
from tests.gui.model.test_model import _run


def _ids(table: RunTable) -> list[int]:
    return [table._row_id(r) for r in range(table.table.rowCount())]


def test_table_rows_follow_model_changes(qtbot) -> None:
    model = RunList([_run(1)])
    table = RunTable(model=model)
    qtbot.addWidget(table)
    assert _ids(table) == [1]  # built from what the model had
    model.add(_run(2, notes="#x"))
    model.add(_run(3))
    assert _ids(table) == [1, 2, 3]
    with qtbot.waitSignal(table.notes_changed, timeout=1000) as sig:
        model.set_note(3, "  #late   note ")
    assert sig.args[0].run_id == 3
    assert table.table.item(2, NOTES_COLUMN).text() == "#late note"
    table.filter.setText("#late")
    assert [table.table.isRowHidden(r) for r in range(3)] == [True, True, False]
    model.remove([1])
    assert _ids(table) == [2, 3]
    model.replace_all([_run(7)])
    assert _ids(table) == [7] and table.runs[0].run_id == 7


def test_a_note_typed_in_the_cell_reaches_the_model(qtbot) -> None:
    model = RunList([_run(1)])
    model.mark_saved()
    table = RunTable(model=model)
    qtbot.addWidget(table)
    table.table.item(0, NOTES_COLUMN).setText("#a   b")  # what the cell editor does
    assert model.get(1).notes == "#a b" and model.unsaved() == [model.get(1)]
    assert table.table.item(0, NOTES_COLUMN).text() == "#a b"


def test_table_sorts_like_the_model(qtbot) -> None:
    model = RunList([_run(1, psnr=9.5), _run(2, psnr=None), _run(3, psnr=10.25),
                     _run(4, psnr=12.0)])
    table = RunTable(model=model)
    qtbot.addWidget(table)
    column = COLUMNS.index("PSNR")
    table.table.sortByColumn(column, QtCore.Qt.SortOrder.AscendingOrder)
    assert _ids(table) == [r.run_id for r in model.sorted("PSNR")] == [1, 3, 4, 2]
    assert table.table_csv().splitlines()[1].startswith("1,")  # the CSV keeps that order


def test_a_deleted_bridge_unsubscribes_instead_of_raising(qtbot) -> None:
    model = RunList()
    bridge = RunListSignals(model)
    assert len(model.events.added) == 1
    bridge.deleteLater()
    qtbot.wait(10)
    QtCore.QCoreApplication.sendPostedEvents(None, QtCore.QEvent.Type.DeferredDelete)
    gc.collect()
    model.add(_run(1))  # must not raise "Internal C++ object already deleted"
    assert len(model.events.added) == 0 and model.ids() == [1]
