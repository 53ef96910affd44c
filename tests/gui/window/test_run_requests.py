"""Run while the window is busy or its parameters have changed: Run during a run asks
first, the number typed in a field is the one that runs (Ctrl+R, Space and Escape work from
the field), and a changed parameter marks the shown result stale until the next run."""

from __future__ import annotations

from tests.gui.conftest import wait_idle, wait_iterations


def test_run_during_a_run_asks_first(qtbot, fake_engine, make_window, monkeypatch) -> None:
    fake_engine(delay=0.002)
    win = make_window({"network": "fake-net", "max_iter": 100000, "tol": 0.0})
    answers: list[bool] = []
    monkeypatch.setattr("lbi_gui.window.run.confirm", lambda *a, **k: answers.pop(0))
    win.runner.run()
    wait_iterations(qtbot, win, 5)
    first = win.controller._active_run
    answers.append(False)
    win.runner.run()  # "no": the running run goes on
    assert win.controller.running and win.controller._active_run == first and not answers
    answers.append(True)
    win.runner.run()  # "yes": a new run replaces it
    assert win.controller._active_run == first + 1
    wait_iterations(qtbot, win, 5)  # the new run has started (curves restart at 0)
    win.runner.stop()
    wait_idle(qtbot, win)


def test_shortcuts_work_while_a_number_field_has_focus(qtbot, fake_engine, make_window) -> None:
    from PySide6 import QtCore

    fake_engine(delay=0.002)
    win = make_window({"network": "fake-net", "max_iter": 100000, "tol": 0.0})
    win.activateWindow()
    field = win.solver_panel.max_iter
    field.setFocus()
    qtbot.waitUntil(field.hasFocus, timeout=2000)
    field.lineEdit().selectAll()
    qtbot.keyClicks(field, "200000")  # typed, not yet committed with Return
    key, ctrl = QtCore.Qt.Key, QtCore.Qt.KeyboardModifier.ControlModifier
    qtbot.keyClick(field, key.Key_R, ctrl)
    qtbot.waitUntil(lambda: win.controller.running, timeout=5000)
    assert win.controller.run_request["max_iter"] == 200000  # the typed value ran
    wait_iterations(qtbot, win, 5)
    qtbot.keyClick(field, key.Key_Space)  # Pause
    qtbot.waitUntil(lambda: win.controller.paused, timeout=5000)
    qtbot.keyClick(field, key.Key_Space)  # Resume
    qtbot.waitUntil(lambda: not win.controller.paused, timeout=5000)
    qtbot.keyClick(field, key.Key_Escape)  # Stop
    wait_idle(qtbot, win)
    assert win.run_table.runs == []


def test_parameter_change_marks_the_shown_result_stale(qtbot, fake_engine, make_window) -> None:
    fake_engine()
    win = make_window({"network": "fake-net", "max_iter": 30})
    win.runner.run()
    wait_idle(qtbot, win)
    win.runner.refresh_stale()
    assert not win.image_grid.stale and not win.curves.stale  # its own parameters: current
    win.reg_panel.alpha.setValue(0.05)
    win.reg_panel._user_alpha()  # what moving the slider does: Auto α off, the user's α
    win.params.flush_changes()
    assert win.image_grid.stale and win.curves.stale and win.curves.stale_banner.isVisibleTo(win)
    assert "α" in win.curves.stale_banner.text() and "#1" in win.curves.stale_banner.text()
    assert win.status.reason.text().startswith("stale")
    assert win.image_grid.items["iterate"].opacity() < 1
    win.runner.run()  # a new run with these parameters is current again
    wait_idle(qtbot, win)
    assert not win.image_grid.stale and not win.curves.stale
    assert win.image_grid.items["iterate"].opacity() == 1
