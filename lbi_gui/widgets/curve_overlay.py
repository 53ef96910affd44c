"""Curves of several runs on the same axes, and TensorBoard-style smoothing.

Overlay: the runs selected in the runs table are drawn as thin extra lines on the objective,
PSNR and discrepancy plots (one colour per run, named by run number), so methods or α values
compare at a glance. Smoothing: an exponential moving average with TensorBoard's debiasing
(the first points are not pulled towards zero); 0 = off.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg

OVERLAY_COLOURS = ["#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#9467bd"]
#: Which curves are overlaid: (plot key, store column)
OVERLAID = (("objective", "objective"), ("psnr", "psnr"), ("discrepancy", "discrepancy"))


def smooth(y: np.ndarray, weight: float) -> np.ndarray:
    """Debiased exponential moving average of ``y`` (NaN points are skipped and kept NaN)."""
    y = np.asarray(y, dtype=np.float64)
    if weight <= 0 or y.size < 2:
        return y
    out = np.full_like(y, np.nan)
    last, steps = 0.0, 0
    for i, v in enumerate(y):
        if not np.isfinite(v):
            continue
        steps += 1
        last = last * weight + (1 - weight) * v
        out[i] = last / (1 - weight ** steps)
    return out


class Overlay:
    """Extra lines on a :class:`~lbi_gui.widgets.curves.CurvesPanel` for other runs."""

    def __init__(self, panel: Any) -> None:
        self.panel = panel
        self.lines: list[tuple[Any, pg.PlotDataItem]] = []
        self.runs: list[Any] = []

    def set_runs(self, runs: list[Any]) -> None:
        """Overlay ``runs`` (RunResult objects; [] removes the overlay)."""
        self.clear()
        self.runs = list(runs)
        for i, run in enumerate(self.runs):
            pen = pg.mkPen(OVERLAY_COLOURS[i % len(OVERLAY_COLOURS)], width=1.2,
                           style=pg.QtCore.Qt.PenStyle.DashLine)
            for plot_key, _column in OVERLAID:
                plot = self.panel.plots[plot_key]
                line = plot.plot([], [], pen=pen, connect="finite",
                                 name=f"#{run.run_id}" if plot_key == "objective" else None)
                self.lines.append((plot, line))
        self.redraw()

    def redraw(self) -> None:
        """Data of every overlaid run, with the panel's x axis, log mode and smoothing."""
        k = 0
        for run in self.runs:
            arr = run.curves.arrays()
            x = arr[self.panel.x_key]
            for plot_key, column in OVERLAID:
                y = self.panel.shown_values(plot_key, arr[column])
                self.lines[k][1].setData(x, y, connect="finite")
                k += 1

    def clear(self) -> None:
        for plot, line in self.lines:
            plot.removeItem(line)
        self.lines, self.runs = [], []
