"""Destructive actions ask first: opening a session over unsaved runs or a live run, quitting
mid-run; an opened session never shows the previous session's comparison."""

from __future__ import annotations

from typing import Any

from tests.gui.conftest import wait_idle, wait_iterations


def _asker(monkeypatch: Any, answers: list[str]) -> list[tuple]:
    asked: list[tuple] = []

    def ask(parent: Any, count: int, running: bool = False, action: str = "") -> str:
        asked.append((count, running, action))
        return answers.pop(0)

    monkeypatch.setattr("lbi_gui.dialogs.messages.ask_unsaved_runs", ask)
    return asked


def test_open_session_asks_about_unsaved_runs_and_clears_the_comparison(
        qtbot, two_runs, monkeypatch, tmp_path) -> None:
    win = two_runs
    win.files.confirm_quit = True
    path = tmp_path / "other.lbisession"
    assert win.files.save_session_to(str(path))  # a session with runs #1 and #2
    win.runner.run()  # a third run, not saved
    wait_idle(qtbot, win)
    qtbot.waitUntil(lambda: len(win.run_table.runs) == 3)
    win.run_table.select_ids([2, 3])
    assert win.run_table.compare_view.shown == (2, 3)
    asked = _asker(monkeypatch, ["cancel", "discard"])
    assert not win.files.open_session(str(path))
    assert asked == [(1, False, "opening the session")]
    assert len(win.run_table.runs) == 3  # cancelled: nothing changed
    assert win.files.open_session(str(path))
    assert [r.run_id for r in win.run_table.runs] == [1, 2]
    assert win.run_table.compare_view.shown is None  # run #3's numbers are gone
    assert "Select two runs" in win.run_table.compare_view.text.text()


def test_open_session_and_quit_ask_while_a_run_is_going(qtbot, fake_engine, make_window,
                                                        monkeypatch, tmp_path) -> None:
    fake_engine(delay=0.01)
    win = make_window({"network": "fake-net", "max_iter": 100000, "tol": 0.0})
    win.files.confirm_quit = True
    path = tmp_path / "empty.lbisession"
    assert win.files.save_session_to(str(path))
    win.runner.run()
    wait_iterations(qtbot, win, 2)
    asked = _asker(monkeypatch, ["cancel", "cancel"])
    assert not win.files.open_session(str(path))
    assert win.controller.running  # the live run was not abandoned
    win.close()
    assert win.isVisible() and win.controller.running
    assert asked == [(0, True, "opening the session"), (0, True, "quitting")]
    win.files.confirm_quit = False
