"""What the window shows and records is what ran: a typed α is the α of every method (the
field, the runs table and result.json agree), Auto α shows its choice and rule, the compare
pane names the α values, and layer-wise is not offered for a one-layer network."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6 import QtWidgets

from lbi_engine.results.run_metrics import RunMetrics
from lbi_gui.model import RunResult
from lbi_gui.widgets.run_table import COLUMNS, CompareView
from tests.gui.conftest import wait_idle, wait_ready


def _cells(win, run) -> dict[str, str]:
    table = win.run_table.table
    row = next(r for r in range(table.rowCount()) if table.item(r, 0).text() == str(run.run_id))
    return {COLUMNS[c]: table.item(row, c).text() for c in range(table.columnCount())}


def test_layerwise_runs_the_typed_alpha_and_the_window_says_so(qtbot, make_window,
                                                                tmp_path) -> None:
    win = make_window({"max_iter": 60, "noise_std": 0.05, "method": "layerwise",
                       "alpha": 0.01})
    assert not win.reg_panel.auto_alpha.isChecked()
    win.runner.run()
    wait_idle(qtbot, win, timeout=120000)
    run = win.run_table.runs[-1]
    assert run.metrics.alpha == pytest.approx(0.01)  # it searched 0.0577 before
    assert run.metrics.stages[-1]["weight"] == [pytest.approx(0.01)]
    cells = _cells(win, run)
    assert cells["alpha"] == "0.01" and cells["alpha rule"] == "typed"
    assert win.reg_panel.alpha.value() == pytest.approx(0.01)
    assert not win.reg_panel.auto_alpha.isChecked()
    assert not win.status.reason.text().startswith("stale")
    assert not win.curves.stale
    # the stages reach the curves (marked there, see test_curve_marks.py)
    assert [name for _i, name in run.curves.stages] == ["layer 3/3", "layer 2/3", "layer 1/3"]
    assert len(win.curves.stage_lines) == 3 * len(win.curves.plots)


def test_auto_alpha_records_the_alpha_that_ran_and_its_rule(qtbot) -> None:
    def run(run_id: int, alpha: object, metrics: dict) -> RunResult:
        x = np.full((4, 4), 0.1 * run_id)
        return RunResult(run_id=run_id, request={"method": "layerwise", "alpha": alpha},
                         stop_reason="tolerance", iterations=5, elapsed=0.1,
                         metrics=RunMetrics.from_dict(metrics),
                         x_raw=x, x_display=x)

    auto = run(1, "auto", {"alpha": 0.0577, "alpha_rule": "quasi-optimality (first local "
                                                          "minimum)", "psnr": 20.0})
    typed = run(2, 0.01, {"alpha": 0.01, "alpha_rule": "given", "psnr": 19.0})
    assert auto.table_row()["alpha"] == pytest.approx(0.0577)
    assert auto.table_row()["alpha rule"] == "quasi-optimality"  # its name; details in json
    assert typed.table_row()["alpha rule"] == "typed"
    assert "0.0577" in auto.label
    view = CompareView()
    qtbot.addWidget(view)
    view.compare(auto, typed, (0.0, 1.0))
    text = view.text.text()
    assert "0.0577" in text and "0.01" in text and "auto" not in text
    assert "quasi-optimality" in text and "typed" in text


def test_layerwise_is_not_offered_for_a_one_layer_network(qtbot, make_window,
                                                         monkeypatch) -> None:
    win = make_window({"network": "circle-perceptron", "dataset": "cartoon", "split": "disc",
                       "method": "layerwise", "max_iter": 20})
    wait_ready(qtbot, win)
    panel = win.solver_panel
    item = panel.method.model().item(panel.method.findData("layerwise"))
    assert not item.isEnabled() and "two layers" in item.toolTip()
    assert not panel.switch.isEnabled() and "two layers" in panel.switch.toolTip()
    assert not win.actions_.switch.isEnabled()
    assert win.params.current_request()["method"] == "auto"  # the session's layer-wise fell back
    win.actions_.switch.trigger()
    assert win.params.current_request()["method"] == "auto"
    assert isinstance(panel.switch, QtWidgets.QPushButton)
    asked: list[list[str]] = []
    monkeypatch.setattr(win.controller, "run_all", lambda _req, methods: asked.append(methods))
    win.runner.run_all_methods()
    assert asked and "layerwise" not in asked[0] and "one-layer" in asked[0]
