"""Curves of several runs on the same axes, and TensorBoard-style smoothing.

Overlay: the runs selected in the runs table are drawn as extra lines on the objective,
PSNR and discrepancy plots (one colour per run, named in a legend by number, method and α),
so methods or α values compare at a glance. Smoothing: an exponential moving average with
TensorBoard's debiasing (the first points are not pulled towards zero); 0 = off.
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


def joins(segments: np.ndarray, *series: np.ndarray) -> np.ndarray:
    """pyqtgraph's ``connect`` array: point i joins point i+1 when both are finite in every
    series and they belong to the same stage (no straight line across a stage boundary or
    the iterations a stage did not report)."""
    ok = np.ones(segments.size, dtype=bool)
    for values in series:
        ok &= np.isfinite(values)
    out = np.zeros(segments.size, dtype=bool)
    if segments.size > 1:
        out[:-1] = ok[:-1] & ok[1:] & (segments[:-1] == segments[1:])
    return out


class Overlay:
    """Extra lines on a :class:`~lbi_gui.widgets.curves.CurvesPanel` for other runs, with a
    legend on the objective plot naming each run (number, method, α) in its colour."""

    def __init__(self, panel: Any) -> None:
        self.panel = panel
        self.lines: list[tuple[Any, pg.PlotDataItem]] = []
        self.runs: list[Any] = []
        self.legend: pg.LegendItem | None = None

    def set_runs(self, runs: list[Any]) -> None:
        """Overlay ``runs`` (RunResult objects; [] removes the overlay)."""
        from lbi_gui.widgets.curve_legend import add_legend, tighten

        self.clear()
        self.runs = list(runs)
        if self.runs and self.legend is None:
            self.legend = add_legend(self.panel.plots["objective"])
        for i, run in enumerate(self.runs):
            pen = pg.mkPen(OVERLAY_COLOURS[i % len(OVERLAY_COLOURS)], width=1.4)
            for plot_key, _column in OVERLAID:
                plot = self.panel.plots[plot_key]
                line = pg.PlotDataItem([], [], pen=pen, connect="finite")
                plot.addItem(line)
                if plot_key == "objective" and self.legend is not None:
                    self.legend.addItem(line, run.label)
                self.lines.append((plot, line))
        if self.legend is not None:
            self.legend.setVisible(bool(self.runs))
            tighten(self.legend)
        self.redraw()

    def colour_of(self, run_id: int) -> str | None:
        """The colour run ``run_id`` is drawn in (None: not overlaid)."""
        ids = [r.run_id for r in self.runs]
        return OVERLAY_COLOURS[ids.index(run_id) % len(OVERLAY_COLOURS)] if run_id in ids \
            else None

    def redraw(self) -> None:
        """Data of every overlaid run, with the panel's x axis, log modes and smoothing; no
        line across a stage boundary."""
        k = 0
        for run in self.runs:
            arr = run.curves.arrays()
            x = self.panel.shown_x(arr[self.panel.x_key])
            segments = run.curves.segment_ids()
            for plot_key, column in OVERLAID:
                y = self.panel.shown_values(plot_key, arr[column], segments)
                self.lines[k][1].setData(x, y, connect=joins(segments, x, y))
                k += 1

    def clear(self) -> None:
        for plot, line in self.lines:
            plot.removeItem(line)
        if self.legend is not None:
            self.legend.clear()
            self.legend.setVisible(False)
        self.lines, self.runs = [], []
