"""Live curves hold 'nice' axis ranges during a run (a changed range re-renders every axis)."""

from __future__ import annotations

import numpy as np

from lbi_gui.model.runs import CurveStore
from lbi_gui.widgets.curves import CurvesPanel, _nice_range


def _points(a: int, b: int) -> list[dict]:
    return [{"iteration": k, "objective": 0.99 ** k, "reg_term": 0.5 * 0.99 ** k,
             "discrepancy": 0.1 + 0.99 ** k, "primal_residual": 0.98 ** k,
             "dual_residual": 0.97 ** k, "psnr": 20 - 10 * 0.99 ** k,
             "ssim": 0.9 - 0.5 * 0.99 ** k, "elapsed": k * 1e-3, "bregman": [0.99 ** k]}
            for k in range(a, b)]


def test_nice_range_rounds_outwards() -> None:
    assert _nice_range([np.array([0.02, 3.0, np.nan])], log=True) == (-2.0, 1.0)
    assert _nice_range([np.array([10.3, 17.8])], log=False) == (10.0, 18.0)
    assert _nice_range([np.array([np.nan])], log=False) is None


def test_held_ranges_change_only_when_data_leaves_them(qtbot) -> None:
    panel = CurvesPanel()
    qtbot.addWidget(panel)
    store = CurveStore()
    store.extend(_points(0, 20))
    panel.update_curves(store, live_until=1000)
    x0 = panel.plots["objective"].viewRange()[0]
    # The x axis follows the data: [0, 1.5 × last iteration], not the
    # expected end of the run, which squashed long runs into the left edge.
    assert x0[0] < 0 and 19 < x0[1] < 1.6 * 19
    held = dict(panel._y_ranges)
    store.extend(_points(20, 25))
    panel.update_curves(store, live_until=1000)
    assert panel._y_ranges == held  # nothing left its range: no axis re-render
    store.extend(_points(25, 400))  # objective falls below 1e-1: its range grows
    panel.update_curves(store, live_until=1000)
    assert panel._y_ranges["objective"][0] <= np.log10(0.99 ** 399)
    x1 = panel.plots["objective"].viewRange()[0]
    assert 399 < x1[1] < 1.6 * 399  # grew with the data, still not the whole 1000
    panel.update_curves(store)  # the run ended: exact auto-range again
    assert panel._y_ranges == {} and panel.plots["psnr"].getViewBox().autoRangeEnabled()[1]
