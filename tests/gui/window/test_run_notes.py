"""Notes and #tags on runs: edited in the table's own cell, filtered on, exported in the
table's CSV, kept by sessions (and sessions written before notes existed still open)."""

from __future__ import annotations

import csv
import json
import zipfile

import pytest
from PySide6 import QtCore, QtWidgets

from lbi_engine.errors import LbiError
from lbi_gui.model.session import load_session
from lbi_gui.widgets.run_table import COLUMNS, NOTES_COLUMN


def _row_of(table, run_id: int) -> int:
    for r in range(table.table.rowCount()):
        if table.table.item(r, 0).data(QtCore.Qt.ItemDataRole.UserRole + 1) == run_id:
            return r
    raise AssertionError(f"run {run_id} is not in the table")


def _double_click(qtbot, table, row: int, column: int) -> None:
    view = table.table
    rect = view.visualRect(view.model().index(row, column))
    # Qt's view acts on a double-click only where the button went down first (as a mouse does)
    qtbot.mouseClick(view.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.mouseDClick(view.viewport(), QtCore.Qt.MouseButton.LeftButton,
                      pos=rect.center())


def _type_note(qtbot, table, run_id: int, text: str) -> None:
    """As a user: double-click the run's notes cell, type, press Enter."""
    row = _row_of(table, run_id)
    table.table.scrollToItem(table.table.item(row, NOTES_COLUMN))
    _double_click(qtbot, table, row, NOTES_COLUMN)
    editing = QtWidgets.QAbstractItemView.State.EditingState
    qtbot.waitUntil(lambda: table.table.state() == editing, timeout=5000)
    # the previous note's editor may still await deletion: take the one on screen
    editor, = [e for e in table.table.viewport().findChildren(QtWidgets.QLineEdit)
               if e.isVisible()]
    editor.selectAll()
    qtbot.keyClicks(editor, text)
    qtbot.keyClick(editor, QtCore.Qt.Key.Key_Return)
    # the delegate commits on Return through a queued call
    qtbot.waitUntil(lambda: table.table.state() != editing, timeout=5000)


def _shown_ids(table) -> list[int]:
    return sorted(table.table.item(r, 0).data(QtCore.Qt.ItemDataRole.UserRole + 1)
                  for r in range(table.table.rowCount()) if not table.table.isRowHidden(r))


def test_edit_filter_and_export_notes(qtbot, two_runs, tmp_path) -> None:
    win = two_runs
    table = win.run_table
    shown_runs: list[int] = []
    table.show_requested.connect(lambda run: shown_runs.append(run.run_id))
    _type_note(qtbot, table, 1, "#baseline good start")
    _type_note(qtbot, table, 2, "#tuned,  too smooth")  # spaces typed with Space (a shortcut)
    by_id = {r.run_id: r for r in table.runs}
    assert by_id[1].notes == "#baseline good start" and by_id[1].tags == ["#baseline"]
    assert by_id[2].notes == "#tuned, too smooth" and by_id[2].tags == ["#tuned"]
    assert table.table.item(_row_of(table, 1), NOTES_COLUMN).text() == "#baseline good start"
    assert shown_runs == []  # double-clicking a note edits it, it does not show the run
    _double_click(qtbot, table, _row_of(table, 1), COLUMNS.index("method"))
    assert shown_runs == [1]  # elsewhere a double-click still shows the run
    assert table.table.state() != QtWidgets.QAbstractItemView.State.EditingState

    table.filter.setText("#baseline")
    assert _shown_ids(table) == [1]
    table.filter.setText("#BASELINE landweber")  # every word must match: none does
    assert _shown_ids(table) == []
    table.filter.setText("smooth landweber")
    assert _shown_ids(table) == [2]
    table.filter.setText("")
    assert _shown_ids(table) == [1, 2]

    out = tmp_path / "runs.csv"
    assert win.exports.export_runs_table(str(out))
    rows = list(csv.DictReader(out.open(newline="")))
    assert {int(r["run"]): r["notes"] for r in rows} == {1: "#baseline good start",
                                                         2: "#tuned, too smooth"}


def test_notes_survive_a_session_and_mark_it_unsaved(qtbot, two_runs, make_window,
                                                     tmp_path) -> None:
    win = two_runs
    path = tmp_path / "notes.lbisession"
    _type_note(qtbot, win.run_table, 1, "#baseline first try")
    assert win.files.save_session_to(str(path))
    assert win.model.runs.unsaved() == []
    _type_note(qtbot, win.run_table, 2, "#later")  # edited after the save
    assert [r.run_id for r in win.model.runs.unsaved()] == [2]

    fresh = make_window({"network": "fake-net"})
    assert fresh.files.open_session(str(path))
    notes = {r.run_id: r.notes for r in fresh.run_table.runs}
    assert notes == {1: "#baseline first try", 2: ""}
    fresh.run_table.filter.setText("#baseline")
    assert _shown_ids(fresh.run_table) == [1]


def _rewrite_runs(src, dst, change) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        meta = json.loads(zin.read("session.json"))
        for run in meta["runs"]:
            change(run)
        zout.writestr("session.json", json.dumps(meta))
        zout.writestr("arrays.npz", zin.read("arrays.npz"))


def test_old_session_without_notes_opens_and_bad_notes_are_refused(
        qtbot, two_runs, make_window, tmp_path) -> None:
    win = two_runs
    _type_note(qtbot, win.run_table, 1, "#baseline")
    saved = tmp_path / "new.lbisession"
    assert win.files.save_session_to(str(saved))
    old = tmp_path / "old.lbisession"
    _rewrite_runs(saved, old, lambda run: run.pop("notes"))  # as written before notes
    with zipfile.ZipFile(old) as zf:
        assert all("notes" not in run for run in json.loads(zf.read("session.json"))["runs"])
    fresh = make_window({"network": "fake-net"})
    assert fresh.files.open_session(str(old))
    assert [(r.run_id, r.notes) for r in fresh.run_table.runs] == [(1, ""), (2, "")]
    out = tmp_path / "old.csv"
    assert fresh.exports.export_runs_table(str(out))
    assert [r["notes"] for r in csv.DictReader(out.open(newline=""))] == ["", ""]

    bad = tmp_path / "bad.lbisession"
    _rewrite_runs(saved, bad, lambda run: run.update(notes={"evil": 1}))
    with pytest.raises(LbiError, match="notes"):
        load_session(bad)
