"""A result that only looks finished is not shown as a success: the status line and the
run's row name the concern (flat, iteration cap) with the next step. The fake engine's
iterate is (1 − 0.99^k) x†, so its contrast against the truth is known at every k."""

from __future__ import annotations

from lbi_gui.widgets.run_table import COLUMNS
from tests.gui.conftest import wait_idle


def _check_cell(win, run_id: int) -> str:
    table = win.run_table.table
    row = next(r for r in range(table.rowCount()) if table.item(r, 0).text() == str(run_id))
    return table.item(row, COLUMNS.index("check")).text()


def test_a_flat_capped_result_says_so_in_the_status_and_the_row(qtbot, fake_engine,
                                                               make_window) -> None:
    fake_engine()
    win = make_window({"network": "fake-net", "max_iter": 20, "alpha": 0.01})
    messages: list[str] = []
    win.statusBar().messageChanged.connect(messages.append)
    win.runner.run()
    wait_idle(qtbot, win)
    qtbot.waitUntil(lambda: len(win.run_table.runs) == 1)
    # 1 − 0.99^20 = 18 % of the truth's contrast: flat; and it ran into max_iter
    assert win.status.reason.text() == "⚠ flat: max_iterations"
    tip = win.status.reason.toolTip()
    assert "flat result: 18% of the ground truth's contrast" in tip and "smaller α" in tip
    assert "iteration cap (20)" in tip and "raise Max iterations" in tip
    assert _check_cell(win, 1) == "flat; iteration cap"
    assert any(m.startswith("Run #1: flat result") for m in messages), messages


def test_a_faithful_result_is_not_called_flat(qtbot, fake_engine, make_window) -> None:
    fake_engine()
    win = make_window({"network": "fake-net", "max_iter": 400, "alpha": 0.01})
    win.runner.run()
    wait_idle(qtbot, win)
    qtbot.waitUntil(lambda: len(win.run_table.runs) == 1)
    assert _check_cell(win, 1) == "iteration cap"  # 98 % of the contrast: not flat
    assert win.status.reason.text() == "⚠ iteration cap: max_iterations"
