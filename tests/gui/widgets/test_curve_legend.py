"""Legend size: the curves' legends stay small relative to their plot
and cover none of a typical run's curve points, or at most a tenth of them when curves fill
every corner of a small plot (each legend goes to the corner with the fewest points)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PySide6 import QtCore

from lbi_gui.model.runs import CurveStore
from lbi_gui.widgets.curves import CurvesPanel


def _run(low_start: bool, layers: int = 3) -> CurveStore:
    """What a multi-layer run reports: Bregman terms and residuals falling from their first
    values, αR(x) rising to its plateau. ``low_start``: as on the CNN at the defaults (seen
    under Xvfb), the last layer's term starts near the bottom of the plot and αR sits high,
    so the lower left is taken and the upper right is free."""
    def breg(i: int, k: int) -> float:
        if low_start:
            return [10 * 0.99 ** k + 0.5, 2 * 0.99 ** k + 0.1, 0.1 * 0.995 ** k + 0.03][i]
        return (2 - 0.4 * i) * 0.99 ** k + 0.05

    store = CurveStore()
    store.extend([{
        "iteration": k, "objective": 20 * 0.99 ** k + 2,
        "reg_term": 3.5 if low_start else 4 - 3 * 0.98 ** k,
        "discrepancy": 0.5 + 0.99 ** k, "primal_residual": 0.5 * 0.985 ** k,
        "dual_residual": 0.3 * 0.98 ** k, "psnr": 23 - 10 * 0.99 ** k, "ssim": 0.8,
        "elapsed": 0.003 * k, "bregman": [breg(i, k) for i in range(layers)]}
        for k in range(0, 520, 10)])
    return store


@pytest.mark.parametrize("low_start", [False, True])
@pytest.mark.parametrize("size", [(900, 420), (560, 330)])  # 1920×1080 and 1280×720 docks
def test_legends_are_small_and_leave_the_curves_visible(qtbot, size, low_start) -> None:
    panel = CurvesPanel()
    qtbot.addWidget(panel)
    panel.resize(*size)
    panel.show()
    panel.set_run(_run(low_start))
    qtbot.waitUntil(lambda: panel.plots["terms"].vb.sceneBoundingRect().height() > 50,
                    timeout=3000)
    qtbot.wait(50)  # the deferred layout fit (CurvesPanel.reflow)
    for plot_key, legend in zip(("terms", "residuals"), panel._legends, strict=True):
        plot = panel.plots[plot_key]
        view = plot.vb.sceneBoundingRect()
        box = legend.sceneBoundingRect()
        assert legend.isVisible() and view.contains(box.center())
        # small: at most half the view's width and height, a quarter of its area
        assert box.width() <= 0.5 * view.width() and box.height() <= 0.5 * view.height()
        assert box.width() * box.height() <= 0.25 * view.width() * view.height()
        # readable but smaller than the axes' 9-pt text
        for _sample, label in legend.items:
            sizes = [float(v) for v in re.findall(r"font-size:\s*([\d.]+)pt",
                                                  label.item.toHtml())]
            assert sizes and 6 <= sizes[-1] <= 8  # the text (the first is the default)
        # no point of the plot's curves lies under the legend
        covered, total = [], 0
        for item in plot.listDataItems():
            x, y = item.getData()
            if x is None:
                continue
            for xi, yi in zip(x, y, strict=True):
                if not np.isfinite(yi):
                    continue
                total += 1
                p = plot.vb.mapViewToScene(QtCore.QPointF(float(xi), float(yi)))
                if box.contains(p):
                    covered.append((item.name(), float(xi)))
        if low_start:  # every corner holds points: the emptiest one, a few points at most
            assert len(covered) <= 0.1 * total, f"{plot_key}: covers {len(covered)}/{total}"
        else:
            assert not covered, f"{plot_key}: the legend covers {covered[:5]}"
