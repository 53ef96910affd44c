"""What TensorBoard users expect of the curves: log-y toggle, x axis as iterations or wall
time (restart marks follow), linked zoom of the image views."""

from __future__ import annotations

import numpy as np
import pytest

from lbi_gui.runs import CurveStore
from lbi_gui.widgets.curves import CurvesPanel


def _store() -> CurveStore:
    store = CurveStore()
    store.extend([{"iteration": k, "objective": 0.99 ** k, "reg_term": 0.1,
                   "discrepancy": 0.1 + 0.99 ** k, "primal_residual": 0.98 ** k,
                   "dual_residual": 0.97 ** k, "psnr": 20.0, "ssim": 0.5,
                   "elapsed": 0.002 * k, "bregman": [0.99 ** k]} for k in range(0, 300, 10)])
    store.mark_restart(150, "α 0.009→0.02")
    return store


def test_log_y_toggle_and_wall_time_axis(qtbot) -> None:
    panel = CurvesPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 400)
    panel.show()
    store = _store()
    panel.set_run(store)
    line = panel.lines["objective"]
    assert panel.plots["objective"].getAxis("left").logMode
    panel.log_box.setChecked(False)  # as a click would
    assert not panel.plots["objective"].getAxis("left").logMode
    np.testing.assert_allclose(line.yData, store.arrays()["objective"])
    assert not panel.plots["psnr"].getAxis("left").logMode  # PSNR stays linear either way
    panel.x_choice.setCurrentIndex(panel.x_choice.findData("elapsed"))
    panel.x_choice.activated.emit(panel.x_choice.currentIndex())
    np.testing.assert_allclose(line.xData, store.arrays()["elapsed"])
    assert panel.plots["objective"].getAxis("bottom").labelText == "time [s]"
    marks = [ln.value() for _p, ln in panel.restart_lines]
    assert marks == pytest.approx([0.3] * len(marks))  # iteration 150 at 2 ms per iteration
    panel.set_x_axis("iteration")
    assert {ln.value() for _p, ln in panel.restart_lines} == {150}


def test_image_views_zoom_together(qtbot, image_grid) -> None:
    grid = image_grid
    grid.set_truth(np.zeros((16, 16)))
    grid.set_iterate(np.ones((16, 16)), 1)
    qtbot.wait(50)
    grid.plots["error"].vb.setRange(xRange=(2, 6), yRange=(2, 6), padding=0)
    qtbot.wait(50)
    ranges = {key: np.round(p.vb.viewRange(), 3).tolist() for key, p in grid.plots.items()}
    assert len({str(r) for r in ranges.values()}) == 1, ranges


def test_lut_auto_contrast_and_histogram(qtbot, image_grid) -> None:
    import pyqtgraph as pg

    grid = image_grid
    rng = np.random.default_rng(1)
    truth = rng.random((16, 16))
    iterate = truth + 0.05 * rng.standard_normal((16, 16))
    iterate[0, 0] = 40.0  # one wild pixel must not set the contrast
    grid.set_truth(truth)
    grid.set_iterate(iterate, 3)
    tools = grid.tools
    tools.lut.setCurrentIndex(tools.lut.findData("viridis"))
    tools.lut.activated.emit(tools.lut.currentIndex())
    expected = pg.colormap.get("viridis").getLookupTable(nPts=256)
    for key in ("truth", "decoder", "iterate"):
        np.testing.assert_array_equal(grid.items[key].lut, expected)
    lo, hi = tools.auto_contrast()
    values = np.concatenate([truth.ravel(), iterate.ravel()])
    assert (lo, hi) == pytest.approx(tuple(np.percentile(values, [0.5, 99.5])))
    assert hi < 2 and grid.levels() == pytest.approx((lo, hi))
    tools.hist_button.setChecked(True)
    counts, edges = tools.update_histogram()
    assert counts.sum() == iterate.size and edges[-1] == pytest.approx(40.0)
    assert [m.value() for m in tools._marks] == pytest.approx([lo, hi])
