"""Runs table as TensorBoard users expect (filter, sort, delete, export, load parameters) and
the unsaved-runs question on quit."""

from __future__ import annotations

import csv

import pytest
from PySide6 import QtCore

from lbi_gui.widgets.run_table import COLUMNS
from tests.gui.conftest import wait_idle


def test_filter_sort_delete_and_export_the_table(qtbot, two_runs, tmp_path) -> None:
    win = two_runs
    table = win.run_table
    shown = lambda: [r for r in range(table.table.rowCount())  # noqa: E731
                     if not table.table.isRowHidden(r)]
    table.filter.setText("landweber")
    assert len(shown()) == 1
    table.filter.setText("")
    assert len(shown()) == 2
    table.table.sortByColumn(COLUMNS.index("alpha"), QtCore.Qt.SortOrder.DescendingOrder)
    assert table.table.item(0, COLUMNS.index("method")).text() == "landweber"
    out = tmp_path / "runs.csv"
    assert win.exports.export_runs_table(str(out))
    rows = list(csv.DictReader(out.open()))
    assert [r["method"] for r in rows] == ["landweber", "joint"]  # the table's order
    assert rows[0]["network"] == "fake-net" and float(rows[1]["alpha"]) == pytest.approx(0.01)
    table.select_ids([1])
    table.table.setFocus()
    qtbot.keyClick(table.table, QtCore.Qt.Key.Key_Delete)
    assert [r.run_id for r in table.runs] == [2]


def test_load_these_parameters(qtbot, two_runs) -> None:
    win = two_runs
    assert win.params.current_request()["method"] == "landweber"
    win.run_table.select_ids([1])
    win.run_table.load.click()
    req = win.params.current_request()
    assert req["method"] == "joint" and req["alpha"] == pytest.approx(0.01)
    # run #2 is still on screen, and these are not its parameters: marked stale
    assert win.view.shown_result.run_id == 2 and win.image_grid.stale


def test_quit_asks_about_unsaved_runs(qtbot, two_runs, monkeypatch, tmp_path) -> None:
    win = two_runs
    win.files.confirm_quit = True
    answers = ["cancel"]
    monkeypatch.setattr("lbi_gui.dialogs.messages.ask_unsaved_runs",
                        lambda parent, n, **kw: (asked.append(n), answers.pop(0))[1])
    asked: list[int] = []
    win.close()
    assert asked == [2] and win.isVisible()  # cancelled: the window stays
    assert win.files.save_session_to(str(tmp_path / "s.lbisession"))
    assert win.model.runs.unsaved() == []
    win.close()  # everything saved: no question
    assert asked == [2] and not win.isVisible()


def test_run_all_shows_progress_per_method_and_cancels(qtbot, fake_engine,
                                                       make_window) -> None:
    fake_engine(delay=0.003)
    # ~4.5 s per method, so that the cancel below lands during the second one also on a
    # loaded machine (at 400 iterations it sometimes ended before the click was processed)
    win = make_window({"network": "fake-net", "max_iter": 1500, "tol": 0.0})
    seen: list[tuple[int, int, str]] = []
    win.controller.queue_progress.connect(lambda n, t, m: seen.append((n, t, m)))
    win.run_table.run_all.click()
    qtbot.waitUntil(lambda: win.controller.running, timeout=5000)
    total = seen[0][1]
    assert seen[0][0] == 1 and total >= 3
    assert win.status.state.text().endswith(f"Run all 1/{total}: Joint (all layers)")
    assert win.run_table.run_all.text() == "Cancel all"
    qtbot.waitUntil(lambda: len(seen) >= 2, timeout=30000)  # the first method finished
    assert seen[1][:2] == (2, total)
    win.run_table.run_all.click()  # cancel during the second
    qtbot.waitUntil(lambda: not win.controller.queue_active, timeout=20000)
    wait_idle(qtbot, win)
    qtbot.wait(200)
    assert len(seen) == 2 and len(win.run_table.runs) == 1  # the rest never ran
    assert win.run_table.run_all.text() == "Run all"


def test_help_shows_the_user_guide_explaining_every_control(qtbot, fake_engine,
                                                           make_window) -> None:
    from PySide6 import QtGui, QtWidgets

    fake_engine()
    win = make_window({"network": "fake-net"})
    assert win.actions_.guide.shortcut() == QtGui.QKeySequence("F1")
    win.actions_.guide.trigger()
    guide = win._user_guide
    assert guide.isVisible()
    text = guide.text()
    assert "The maths in a few lines" in text and "B_Ψ(x_l, W_l x_{l−1} + b_l)" in text
    labels = set()
    for panel in win.panels:
        for form in panel.findChildren(QtWidgets.QFormLayout):
            for row in range(form.rowCount()):
                item = form.itemAt(row, QtWidgets.QFormLayout.ItemRole.LabelRole)
                if item is not None and item.widget() is not None:
                    labels.add(item.widget().text())
        labels |= {b.text() for b in panel.findChildren(QtWidgets.QAbstractButton)
                   if b.text() and b.text() not in ("◀", "▶")}
    labels |= {win.curves.log_box.text(), win.run_table.filter.placeholderText()}
    missing = sorted(label for label in labels if label.replace("&", "") not in text)
    assert not missing, missing
    guide.close()


def test_recent_networks_and_images(qtbot, fake_engine, make_window, tmp_path) -> None:
    import numpy as np

    from lbi_gui.settings import recent_files

    fake_engine()
    win = make_window({"network": "fake-net"})
    net = str(tmp_path / "mine.onnx")  # the fake engine "loads" any name
    win.files.open_network(net)
    qtbot.waitUntil(lambda: win.view.info.request.get("network") == net, timeout=10000)
    truth = tmp_path / "x.npy"
    np.save(truth, np.zeros((16, 16), dtype=np.float32))
    win.files.open_data_file("image", str(truth))
    qtbot.waitUntil(lambda: win.view.info.request.get("truth") == str(truth), timeout=10000)
    assert recent_files("networks") == [net] and recent_files("images") == [str(truth)]
    actions = {a.text(): a for a in win.actions_.recent_menu.actions() if a.data()}
    assert {"mine.onnx", "x.npy"} <= set(actions)
    win.data_panel.use_dataset.click()
    win.params.flush_changes()
    actions["x.npy"].trigger()  # opens it again
    assert win.params.current_request()["truth"] == str(truth)
