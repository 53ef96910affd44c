"""Curves that explain themselves: stages and alpha-search solves marked and never joined by
a straight line, mark labels short and inside the plot, overlays with a legend, the raw
curve faint under a smoothed one, log x, and a time axis without an SI factor."""

from __future__ import annotations

import numpy as np
import pytest

from lbi_engine.results.run_metrics import RunMetrics
from lbi_gui.model import RunResult
from lbi_gui.model.runs import CurveStore
from lbi_gui.widgets.curves import MARK_LABEL_CHARS, RAW_OPACITY, CurvesPanel


def _point(k: int, stage: str, objective: float) -> dict:
    return {"iteration": k, "objective": objective, "reg_term": 0.1, "discrepancy": 0.5,
            "primal_residual": 0.9 ** (k % 50 + 1), "dual_residual": None, "psnr": 15 + k / 100,
            "ssim": None, "elapsed": 1e-5 * k, "bregman": [0.2], "stage": stage}


def _layerwise() -> CurveStore:
    store = CurveStore()
    store.extend([_point(k, "layer 3/3", 50.0 - k / 10) for k in range(0, 90, 10)])
    store.extend([_point(k, "layer 2/3", 300.0 - k / 10) for k in range(90, 160, 10)])
    # the input stage's alpha search ran 500 unreported iterations before it
    store.extend([_point(k, "layer 1/3", 9.0 - k / 1000) for k in range(660, 1000, 20)])
    return store


@pytest.fixture
def panel(qtbot) -> CurvesPanel:
    panel = CurvesPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 420)
    panel.show()
    qtbot.wait(30)
    return panel


def _objective_marks(panel: CurvesPanel) -> list:
    return [line for plot, line in panel.stage_lines if plot is panel.plots["objective"]]


def test_layerwise_stages_are_marked_and_not_joined(panel) -> None:
    store = _layerwise()
    assert [name for _i, name in store.stages] == ["layer 3/3", "layer 2/3", "layer 1/3"]
    panel.set_run(store)
    marks = _objective_marks(panel)
    assert [m.value() for m in marks] == [0, 90, 660]
    assert [m.label.format for m in marks] == ["layer 3/3", "layer 2/3", "layer 1/3"]
    assert len(panel.stage_lines) == 3 * len(panel.plots)  # on every plot
    connect = panel.lines["objective"].opts["connect"]
    ends = [8, 15]  # last points of stages 3/3 and 2/3
    assert not connect[ends].any() and connect[:8].all() and connect[9:15].all()
    panel.set_x_axis("elapsed")  # marks follow the axis
    assert [m.value() for m in _objective_marks(panel)] == pytest.approx([0, 9e-4, 6.6e-3])


def test_the_alpha_search_segments_are_marked_with_their_alpha(panel) -> None:
    store = CurveStore()
    for first, stage in ((0, "alpha search: 0.00124"), (115, "alpha search: 0.0124"),
                         (170, "alpha search: 0.00931"), (230, "")):
        store.extend([_point(first + k, stage, 2.0 + k) for k in range(0, 50, 10)])
    store.extend([_point(280, "alpha 0.00931 (discrepancy)", 1.5)])  # the final record
    assert [n for _i, n in store.stages] == ["alpha search: 0.00124", "alpha search: 0.0124",
                                             "alpha search: 0.00931",
                                             "alpha 0.00931 (discrepancy)"]
    panel.set_run(store)
    labels = [m.label.format for m in _objective_marks(panel)]
    assert labels[:3] == ["α 0.00124", "α 0.0124", "α 0.00931"]
    assert labels[3].startswith("α 0.00931") and len(labels[3]) <= MARK_LABEL_CHARS
    connect = panel.lines["objective"].opts["connect"]
    assert not connect[[4, 9, 14]].any()  # the objective's jumps are not drawn as lines
    assert connect[15:19].all()  # the final solve's last record joins its solve
    again = CurveStore.from_arrays(store.to_arrays(), [])  # sessions keep the stages
    assert again.stages == store.stages


def test_mark_labels_are_short_and_stay_inside_the_plot(panel, qtbot) -> None:
    store = CurveStore()
    store.extend([_point(k, "", 1.0 + 1 / (k + 1)) for k in range(0, 300, 5)])
    panel.set_run(store)
    for k in (20, 30, 280, 290):
        panel.mark_restart(k, "regulariser tv→tv+box, α 0.0107→0.02")
    qtbot.wait(50)
    plot = panel.plots["objective"]
    view = plot.vb.sceneBoundingRect()
    labels = [line.label for p, line in panel.restart_lines if p is plot]
    assert all(len(label.format) <= MARK_LABEL_CHARS for label in labels)
    rows = {round(label.orthoPos, 2) for label in labels}
    assert len(rows) == 4  # four neighbours, four rows: no overprint
    for label in labels:
        rect = label.sceneBoundingRect()
        assert view.left() - 1 <= rect.left() and rect.right() <= view.right() + 1, \
            (rect, view)  # "regularis" was cut at the right edge


def test_overlaid_runs_have_a_legend_and_own_colours(panel) -> None:
    def run(run_id: int, method: str, alpha: float) -> RunResult:
        x = np.zeros((4, 4))
        return RunResult(run_id=run_id, request={"method": method, "alpha": alpha},
                         stop_reason="tolerance", iterations=100, elapsed=1.0,
                         metrics=RunMetrics(alpha=alpha), x_raw=x, x_display=x,
                         curves=_layerwise())

    panel.overlay.set_runs([run(1, "joint", 0.01), run(2, "layerwise", 0.05)])
    legend = panel.overlay.legend
    names = [label.text for _sample, label in legend.items]
    assert names == ["#1 joint α=0.01", "#2 layerwise α=0.05"] and legend.isVisible()
    colours = {panel.overlay.colour_of(1), panel.overlay.colour_of(2)}
    assert len(colours) == 2 and None not in colours
    line = panel.overlay.lines[0][1]
    assert not line.opts["connect"][[8, 15]].any()  # stages not joined in overlays either
    panel.overlay.set_runs([])
    assert not legend.isVisible() and not legend.items


def test_smoothing_keeps_the_raw_curve_faint(panel) -> None:
    store = _layerwise()
    panel.set_run(store)
    raw = panel.raw_lines["objective"]
    assert not raw.isVisible()
    panel.smoothing.setValue(0.6)
    assert raw.isVisible() and raw.opacity() == pytest.approx(RAW_OPACITY)
    values = store.arrays()["objective"]
    np.testing.assert_allclose(raw.yData, values)
    smoothed = panel.lines["objective"].yData
    assert not np.allclose(smoothed, values)
    # smoothing restarts at each stage: the first point of a stage is its raw value
    assert smoothed[9] == pytest.approx(values[9])
    panel.smoothing.setValue(0.0)
    assert not raw.isVisible()


def test_log_x_and_a_time_axis_without_an_si_factor(panel, qtbot) -> None:
    store = _layerwise()
    panel.set_run(store)
    panel.logx_box.setChecked(True)
    axis = panel.plots["objective"].getAxis("bottom")
    assert axis.logMode
    assert np.isnan(panel.lines["objective"].xData[0])  # iteration 0 has no log
    assert [m.value() for m in _objective_marks(panel)][1:] == pytest.approx(
        [np.log10(90), np.log10(660)])
    panel.logx_box.setChecked(False)
    panel.set_x_axis("elapsed")  # 0 .. 0.01 s: pyqtgraph would write "(x0.001)"
    qtbot.wait(50)  # the axes take the new range
    for plot in panel.plots.values():
        text = plot.getAxis("bottom").labelString()
        assert "x0.001" not in text and "(x" not in text and "time [s]" in text


def test_restart_labels_do_not_overprint(qtbot) -> None:
    from lbi_gui.model.runs import CurveStore
    from lbi_gui.widgets.curves import CurvesPanel

    panel = CurvesPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 400)
    panel.show()
    store = CurveStore()
    store.extend([{"iteration": k, "objective": 0.99 ** k, "reg_term": 0.1,
                   "discrepancy": 0.1, "primal_residual": 0.1, "dual_residual": 0.1,
                   "psnr": 20.0, "ssim": 0.5, "elapsed": k * 1e-3, "bregman": [0.1]}
                  for k in range(300)])
    panel.update_curves(store)
    for k in (100, 104, 108):  # three restarts close together (a slider drag)
        panel.mark_restart(k, "α 0.009→0.02")
    qtbot.wait(50)
    labels = [line.label for plot, line in panel.restart_lines
              if plot is panel.plots["objective"]]
    boxes = [lab.mapRectToScene(lab.boundingRect()) for lab in labels]
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            assert not boxes[i].intersects(boxes[j]), (boxes[i], boxes[j])
