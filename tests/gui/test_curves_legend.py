"""Defect 13 (issue #20), legend size: the curves' legends stay small relative to their plot
and do not cover the curves of a typical run (terms and residuals falling, αR rising)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PySide6 import QtCore

from lbi_gui.runs import CurveStore
from lbi_gui.widgets.curves import CurvesPanel


def _typical_run(layers: int = 3) -> CurveStore:
    """What a multi-layer run reports: Bregman terms and residuals falling from their first
    values, αR(x) rising from small to its plateau, as on the CNN at the defaults."""
    store = CurveStore()
    store.extend([{
        "iteration": k, "objective": 20 * 0.99 ** k + 2, "reg_term": 4 - 3 * 0.98 ** k,
        "discrepancy": 0.5 + 0.99 ** k, "primal_residual": 0.5 * 0.985 ** k,
        "dual_residual": 0.3 * 0.98 ** k, "psnr": 23 - 10 * 0.99 ** k, "ssim": 0.8,
        "elapsed": 0.003 * k, "bregman": [(2 - 0.4 * i) * 0.99 ** k + 0.05 for i in
                                          range(layers)]} for k in range(0, 520, 10)])
    return store


@pytest.mark.parametrize("size", [(900, 420), (560, 330)])  # 1920×1080 and 1280×720 docks
def test_legends_are_small_and_leave_the_curves_visible(qtbot, size) -> None:
    panel = CurvesPanel()
    qtbot.addWidget(panel)
    panel.resize(*size)
    panel.show()
    panel.set_run(_typical_run())
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
        covered = []
        for item in plot.listDataItems():
            x, y = item.getData()
            if x is None:
                continue
            for xi, yi in zip(x, y, strict=True):
                if not np.isfinite(yi):
                    continue
                p = plot.vb.mapViewToScene(QtCore.QPointF(float(xi), float(yi)))
                if box.contains(p):
                    covered.append((item.name(), float(xi)))
        assert not covered, f"{plot_key}: the legend covers {covered[:5]}"
