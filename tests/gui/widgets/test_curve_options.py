"""What TensorBoard users expect of the curves: log-y toggle, x axis as iterations or wall
time (restart marks follow), linked zoom of the image views."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6 import QtCore

from lbi_gui.model.runs import CurveStore
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


def test_line_profile_reads_the_pixels_under_the_segment(qtbot, image_grid) -> None:
    grid = image_grid
    truth = np.arange(256, dtype=np.float64).reshape(16, 16) / 256
    iterate = truth[::-1].copy()
    grid.set_truth(truth)
    grid.set_iterate(iterate, 1)
    grid.profile.button.click()
    assert grid.profile.plot.isVisibleTo(grid) and grid.profile.roi is not None
    grid.profile.set_segment((0.5, 5.5), (15.5, 5.5))  # through the centres of row 5
    prof = grid.profile.profiles()
    np.testing.assert_allclose(prof["truth"], truth[5, :16], atol=1e-9)
    np.testing.assert_allclose(prof["iterate"], iterate[5, :16], atol=1e-9)
    grid.profile.set_segment((3.5, 0.5), (3.5, 15.5))  # down column 3
    np.testing.assert_allclose(grid.profile.profiles()["truth"], truth[:16, 3], atol=1e-9)
    line = grid.profile.lines["iterate"]
    np.testing.assert_allclose(line.yData, iterate[:16, 3], atol=1e-9)
    between = grid.profile.profiles()  # half-way between two pixels: their mean
    grid.profile.set_segment((3.0, 0.5), (3.0, 15.5))
    np.testing.assert_allclose(grid.profile.profiles()["truth"],
                               (truth[:16, 2] + truth[:16, 3]) / 2, atol=1e-9)
    assert between["truth"].size == 16
    grid.profile.button.click()
    assert grid.profile.roi is None and not grid.profile.plot.isVisibleTo(grid)


def test_smoothing_is_a_debiased_moving_average(qtbot) -> None:
    from lbi_gui.widgets.curve_overlay import smooth

    y = np.array([1.0, 3.0, np.nan, 5.0])
    s = smooth(y, 0.5)
    # TensorBoard: last = w·last + (1−w)·v, shown last / (1 − w^n)
    assert s[0] == pytest.approx(1.0) and np.isnan(s[2])
    assert s[1] == pytest.approx((0.25 + 0.5 * 3.0) / 0.75)
    assert s[3] == pytest.approx(((0.25 + 1.5) * 0.5 + 2.5) / 0.875)
    np.testing.assert_array_equal(smooth(y, 0.0), y)
    panel = CurvesPanel()
    qtbot.addWidget(panel)
    store = _store()
    panel.set_run(store)
    panel.set_log_y(False)
    panel.smoothing.setValue(0.6)
    np.testing.assert_allclose(panel.lines["psnr"].yData, smooth(store.arrays()["psnr"], 0.6))
    np.testing.assert_allclose(panel.lines["objective"].yData,
                               smooth(store.arrays()["objective"], 0.6))


def test_selected_runs_are_overlaid(qtbot, fake_engine, make_window) -> None:
    from tests.gui.conftest import wait_idle

    fake_engine()
    win = make_window({"network": "fake-net", "max_iter": 30})
    for alpha in (0.01, 0.02):
        win.params.set_request({**win.params.current_request(), "alpha": alpha})
        win.params.flush_changes()
        win.runner.run()
        wait_idle(qtbot, win)
    assert len(win.run_table.runs) == 2
    win.run_table.select_ids([1, 2])
    overlay = win.curves.overlay
    assert [r.run_id for r in overlay.runs] == [1, 2] and len(overlay.lines) == 6
    objective_lines = [ln for plot, ln in overlay.lines if plot is win.curves.plots["objective"]]
    for run, line in zip(win.run_table.runs, objective_lines, strict=True):
        np.testing.assert_allclose(line.xData, run.curves.arrays()["iteration"])
    win.run_table.select_ids([2])  # one row: shown, the runs checked stay drawn
    assert [r.run_id for r in overlay.runs] == [1, 2]
    win.curves.run_list.item(1).setCheckState(QtCore.Qt.CheckState.Unchecked)
    win.curves.run_list.item(2).setCheckState(QtCore.Qt.CheckState.Unchecked)
    assert overlay.lines == []  # the run list decides what is drawn


def test_ssim_measured_on_some_records_is_one_joined_line(qtbot) -> None:
    """The engine measures SSIM live once per 50 iterations: the points it has are joined,
    not drawn as isolated dots between gaps."""
    panel = CurvesPanel()
    qtbot.addWidget(panel)
    store = CurveStore()
    store.extend([{"iteration": k, "objective": 1.0, "psnr": 20.0,
                   "ssim": 0.5 + k / 1000 if k % 50 == 0 else None}
                  for k in range(0, 200, 5)])
    panel.set_run(store)
    line = panel.lines["ssim"]
    np.testing.assert_array_equal(line.xData, [0, 50, 100, 150])
    np.testing.assert_allclose(line.yData, [0.5, 0.55, 0.6, 0.65])
    assert line.opts["connect"] == "all"
