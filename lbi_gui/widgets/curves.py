"""Live convergence curves against iteration, with warm restarts marked.

One PlotDataItem per curve, created once and updated in place with ``setData``; log-scale
plots get non-positive values replaced by NaN (log of 0 is not a point) and draw with
``connect="finite"`` so gaps stay gaps.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from lbi_gui.runs import CurveStore

LAYER_COLOURS = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]
RESTART_PEN = pg.mkPen("#ff7f0e", width=1.5, style=QtCore.Qt.PenStyle.DashLine)


class LogAxis(pg.AxisItem):
    """A log axis that labels decades only (plus 2 and 5 when less than two decades show).

    pyqtgraph labels every minor tick of a log axis, which overprints on small plots.
    """

    def logTickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph override
        decades = [v for v in values if abs(v - round(v)) < 1e-6]
        out = []
        for v in values:
            mantissa = 10 ** (v - np.floor(v + 1e-9))
            keep = abs(v - round(v)) < 1e-6 or (len(decades) < 2 and
                                                 round(mantissa) in (2, 5))
            out.append(_tick(10 ** v) if keep else "")
        return out


def _tick(x: float) -> str:
    if 1e-3 <= x < 1e4:
        return f"{x:g}"
    exponent = int(np.floor(np.log10(x) + 1e-9))
    mantissa = x / 10 ** exponent
    return (f"1e{exponent}" if abs(mantissa - 1) < 1e-6 else f"{mantissa:.0f}e{exponent}")


def _positive(y: np.ndarray) -> np.ndarray:
    y = np.array(y, dtype=np.float64, copy=True)
    y[~(y > 0)] = np.nan
    return y


class CurvesPanel(QtWidgets.QWidget):
    """Objective, Bregman terms and αR, PSNR/SSIM, discrepancy, residuals."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        pg.setConfigOptions(antialias=True)
        self.glw = pg.GraphicsLayoutWidget()
        self.glw.setBackground("w")
        specs = [("objective", "Objective", True), ("terms", "Bregman terms and αR", True),
                 ("psnr", "PSNR [dB]", False), ("discrepancy", "Discrepancy ‖σ(f(x)) − y^δ‖", True),
                 ("residuals", "Residuals", True), ("ssim", "SSIM", False)]
        self.plots: dict[str, pg.PlotItem] = {}
        for i, (key, title, log) in enumerate(specs):
            axes = {"left": LogAxis("left")} if log else None
            plot = self.glw.addPlot(row=i // 3, col=i % 3, axisItems=axes)
            plot.setTitle(title, size="10pt")
            plot.setLogMode(x=False, y=log)
            plot.showGrid(x=True, y=True, alpha=0.25)
            plot.setLabel("bottom", "iteration")
            plot.getAxis("left").setWidth(48)
            if i:
                plot.setXLink(self.plots["objective"])
            self.plots[key] = plot
        self._log = {key: log for key, _t, log in specs}
        self.lines: dict[str, pg.PlotDataItem] = {}
        legend_terms = self.plots["terms"].addLegend(offset=(-5, 5), labelTextSize="8pt")
        legend_res = self.plots["residuals"].addLegend(offset=(-5, 5), labelTextSize="8pt")
        self._add("objective", "objective", "#d62728")
        self._add("terms", "reg_term", "#ff7f0e", name="αR(x)")
        self._add("psnr", "psnr", "#1f77b4", name="inversion")
        self._add("discrepancy", "discrepancy", "#2ca02c")
        self._add("residuals", "primal_residual", "#1f77b4", name="primal")
        self._add("residuals", "dual_residual", "#d62728", name="dual")
        self._add("ssim", "ssim", "#9467bd")
        self._legends = (legend_terms, legend_res)
        self.layer_lines: list[pg.PlotDataItem] = []
        self.restart_lines: list[tuple[pg.PlotItem, pg.InfiniteLine]] = []
        self.restarts: list[tuple[int, str]] = []
        self._refs: list[tuple[pg.PlotItem, pg.InfiniteLine]] = []
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.glw)

    def _add(self, plot: str, key: str, colour: str, name: str | None = None) -> None:
        self.lines[key] = self.plots[plot].plot([], [], pen=pg.mkPen(colour, width=1.6),
                                                name=name, connect="finite")

    def _ensure_layers(self, n: int) -> None:
        """One line per lifted layer's Bregman term (recreated only when L changes)."""
        if n == len(self.layer_lines):
            return
        for line in self.layer_lines:
            self.plots["terms"].removeItem(line)
        self.layer_lines = [
            self.plots["terms"].plot([], [], pen=pg.mkPen(LAYER_COLOURS[i % len(LAYER_COLOURS)],
                                                          width=1.3),
                                     name=f"B layer {i + 1}", connect="finite")
            for i in range(n)]

    # ---- updates -------------------------------------------------------------------------
    def update_curves(self, store: CurveStore) -> None:
        """Show every point of ``store`` (called at most ~30 times per second)."""
        arr = store.arrays()
        it = arr["iteration"]
        for key, line in self.lines.items():
            y = arr[key]
            plot_log = self._log[self._plot_of(key)]
            line.setData(it, _positive(y) if plot_log else y, connect="finite")
        breg = arr["bregman"]
        self._ensure_layers(breg.shape[1] if breg.ndim == 2 else 0)
        for i, line in enumerate(self.layer_lines):
            line.setData(it, _positive(breg[:, i]), connect="finite")

    def _plot_of(self, key: str) -> str:
        return {"objective": "objective", "reg_term": "terms", "psnr": "psnr",
                "discrepancy": "discrepancy", "primal_residual": "residuals",
                "dual_residual": "residuals", "ssim": "ssim"}[key]

    def mark_restart(self, iteration: int, what: str) -> None:
        """A vertical dashed line on every plot at a warm restart."""
        self.restarts.append((int(iteration), what))
        for key, plot in self.plots.items():
            line = pg.InfiniteLine(pos=iteration, angle=90, pen=RESTART_PEN, movable=False,
                                   label=what if key == "objective" else None,
                                   labelOpts={"position": 0.92, "color": "#b35900",
                                              "fill": (255, 255, 255, 200),
                                              "anchors": [(0, 0.5), (0, 0.5)]})
            line.setToolTip(f"warm restart at iteration {iteration}: {what}")
            plot.addItem(line)
            self.restart_lines.append((plot, line))

    def set_references(self, decoder_psnr: float | None, noise_norm: float | None) -> None:
        """Dashed reference lines: decoder PSNR and the noise norm ‖n‖ (discrepancy level)."""
        for plot, ref in self._refs:
            plot.removeItem(ref)
        self._refs = []
        pen = pg.mkPen("#7f7f7f", width=1, style=QtCore.Qt.PenStyle.DotLine)
        if decoder_psnr is not None and np.isfinite(decoder_psnr):
            ref = pg.InfiniteLine(pos=decoder_psnr, angle=0, pen=pen,
                                  label=f"decoder {decoder_psnr:.1f} dB",
                                  labelOpts={"position": 0.7, "color": "#555",
                                             "anchors": [(0.5, 0), (0.5, 0)]})
            self.plots["psnr"].addItem(ref)
            self._refs.append((self.plots["psnr"], ref))
        if noise_norm is not None and noise_norm > 0:
            ref = pg.InfiniteLine(pos=np.log10(noise_norm), angle=0, pen=pen, label="‖n‖",
                                  labelOpts={"position": 0.1, "color": "#555"})
            self.plots["discrepancy"].addItem(ref)
            self._refs.append((self.plots["discrepancy"], ref))

    def set_run(self, store: CurveStore) -> None:
        """Show a whole stored run (e.g. from a session): curves and restart marks."""
        self.clear()
        self.update_curves(store)
        for it, what in store.restarts:
            self.mark_restart(it, what)

    def clear(self) -> None:
        for line in self.lines.values():
            line.setData([], [])
        for line in self.layer_lines:
            line.setData([], [])
        for plot, line in self.restart_lines:
            plot.removeItem(line)
        self.restart_lines = []
        self.restarts = []

    def export_item(self) -> pg.GraphicsLayout:
        """What plot exports render (all curves as one figure)."""
        return self.glw.ci
