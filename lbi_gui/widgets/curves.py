"""Live convergence curves against iteration, with warm restarts marked.

One PlotDataItem per curve, created once and updated in place with ``setData``; log-scale
plots get non-positive values replaced by NaN (log of 0 is not a point) and draw with
``connect="finite"`` so gaps stay gaps.

The six plots reflow to the panel's width (three, two or one per row) inside a scroll area
that scrolls vertically when the panel is too short for plots of a readable height, so no
plot is ever cut. During a run the x axis follows the data (it grows by half when the data
reaches its end), never a fixed ``max_iter``.

Beside it: ``curve_axes`` (the log axis, the ranges held during a run), ``curve_marks`` (stage,
restart and reference lines), ``curve_legend`` and ``curve_overlay`` (other runs' curves).
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from lbi_gui.model.runs import CurveStore
from lbi_gui.widgets.curve_axes import HeldRanges, LogAxis, _positive
from lbi_gui.widgets.curve_axes import _nice_range as _nice_range  # re-exported (tests)
from lbi_gui.widgets.curve_legend import add_legend, place_legend, subscript, tighten
from lbi_gui.widgets.curve_marks import MARK_LABEL_CHARS as MARK_LABEL_CHARS  # re-exported
from lbi_gui.widgets.curve_marks import CurveMarks
from lbi_gui.widgets.curve_overlay import Overlay, joins, smooth
from lbi_gui.widgets.curve_runs import CurveRunList

LAYER_COLOURS = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]
#: Plot sizes below which the grid reflows (fewer columns) or scrolls (fixed row height).
MIN_PLOT_WIDTH = 225
MIN_PLOT_HEIGHT = 190
#: Opacity of the raw curve drawn under a smoothed one (TensorBoard keeps it faint).
RAW_OPACITY = 0.25
# Values the engine measures on some records only (SSIM: at most once per 50 iterations
# before the final record, lbi_engine.solvers._monitor.SSIM_LIVE_SPAN): the missing ones are
# not gaps, so the measured points are joined.
SPARSE_KEYS = frozenset({"ssim"})


class CurvesPanel(CurveMarks, HeldRanges, QtWidgets.QWidget):
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
            plot = pg.PlotItem(axisItems=axes)
            self.glw.addItem(plot, row=i // 3, col=i % 3)
            plot.setTitle(title, size="9pt")
            plot.setLogMode(x=False, y=log)
            plot.showGrid(x=True, y=True, alpha=0.25)
            plot.setLabel("bottom", "iteration")
            plot.getAxis("left").setWidth(48)
            plot.getAxis("bottom").setStyle(hideOverlappingLabels=True)
            for side in ("left", "bottom"):
                # no "(x0.001)" beside a label: ticks read in the label's own unit
                plot.getAxis(side).enableAutoSIPrefix(False)
                # Axes (ticks, labels and the grid across the view) are cached as pixmaps:
                # replaying their pictures on each redraw held the GIL ~2 ms per axis.
                plot.getAxis(side).setCacheMode(
                    QtWidgets.QGraphicsItem.CacheMode.DeviceCoordinateCache)
            if i:
                plot.setXLink(self.plots["objective"])
            self.plots[key] = plot
        self._log = {key: log for key, _t, log in specs}
        self.lines: dict[str, pg.PlotDataItem] = {}
        # Each legend moves to the corner where it covers the fewest points (_place_legends).
        legend_terms, legend_res = (add_legend(self.plots[key]) for key in ("terms", "residuals"))
        self._add("objective", "objective", "#d62728")
        self._add("terms", "reg_term", "#ff7f0e", name="αR")
        self._add("psnr", "psnr", "#1f77b4", name="inversion")
        self._add("discrepancy", "discrepancy", "#2ca02c")
        self._add("residuals", "primal_residual", "#1f77b4", name="primal")
        self._add("residuals", "dual_residual", "#d62728", name="dual")
        self._add("ssim", "ssim", "#9467bd")
        self._legends = (legend_terms, legend_res)
        for legend in self._legends:  # now that they hold their entries
            tighten(legend)
        for key in ("terms", "residuals"):
            self.plots[key].vb.sigRangeChanged.connect(self._place_legends)
        self.plots["objective"].vb.sigXRangeChanged.connect(self._place_mark_labels)
        self.layer_lines: list[pg.PlotDataItem] = []
        # The raw values under a smoothed curve, faint (shown only while smoothing is on).
        self.raw_lines: dict[str, pg.PlotDataItem] = {}
        for key, line in self.lines.items():
            raw = pg.PlotDataItem([], [], pen=line.opts["pen"], connect="finite")
            raw.setOpacity(RAW_OPACITY)
            raw.setVisible(False)
            self.plots[self._plot_of(key)].addItem(raw)
            self.raw_lines[key] = raw
        self.stage_lines: list[tuple[pg.PlotItem, pg.InfiniteLine]] = []
        self._stage_count = 0  # stages of the store already marked
        self.restart_lines: list[tuple[pg.PlotItem, pg.InfiniteLine]] = []
        self.restarts: list[tuple[int, str]] = []
        self._restart_at: dict[int, int] = {}  # id(line) -> its iteration
        self._refs: list[tuple[pg.PlotItem, pg.InfiniteLine]] = []
        self._x_hi: float | None = None  # held x range during a run (see update_curves)
        self._y_ranges: dict[str, tuple[float, float]] = {}
        self.stale = False
        self._order = [key for key, _t, _l in specs]
        self.columns = 3
        self.plots_area = QtWidgets.QScrollArea()
        self.plots_area.setWidgetResizable(True)
        self.plots_area.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        self.plots_area.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.plots_area.setWidget(self.glw)
        self.glw.setMinimumSize(1, 2 * MIN_PLOT_HEIGHT)
        self.x_key = "iteration"  # or "elapsed" (wall time of the solver, seconds)
        self._store: CurveStore | None = None
        self._ref_values: tuple[float | None, float | None] = (None, None)
        self._log_default = dict(self._log)
        self.x_choice = QtWidgets.QComboBox()
        self.x_choice.addItem("x: iterations", "iteration")
        self.x_choice.addItem("x: wall time [s]", "elapsed")
        self.x_choice.setToolTip("Plot the curves against the iteration or the solver's time")
        self.log_box = QtWidgets.QCheckBox("log y")
        self.log_box.setChecked(True)
        self.log_box.setToolTip("Logarithmic y axes for objective, terms, discrepancy and "
                                "residuals")
        self.logx_box = QtWidgets.QCheckBox("log x")
        self.logx_box.setToolTip("Logarithmic x axes (iteration or time): the first "
                                 "iterations and the long tail in one view")
        self.logx_box.toggled.connect(self.set_log_x)
        self.log_x = False
        self.smoothing = QtWidgets.QDoubleSpinBox()
        self.smoothing.setRange(0.0, 0.99)
        self.smoothing.setSingleStep(0.1)
        self.smoothing.setPrefix("smooth ")
        self.smoothing.setToolTip("Exponential moving average of the curves (TensorBoard's "
                                  "smoothing, debiased); 0 = the raw values")
        self.smoothing.valueChanged.connect(lambda _v: self._redraw())
        self.overlay = Overlay(self)
        self.x_choice.activated.connect(lambda _i: self.set_x_axis(self.x_choice.currentData()))
        self.log_box.toggled.connect(self.set_log_y)
        options = QtWidgets.QHBoxLayout()
        options.setContentsMargins(4, 0, 4, 0)
        options.addWidget(self.x_choice)
        options.addWidget(self.log_box)
        options.addWidget(self.logx_box)
        options.addWidget(self.smoothing)
        options.addStretch(1)
        self.stale_banner = QtWidgets.QLabel()
        self.stale_banner.setWordWrap(True)
        self.stale_banner.setStyleSheet("background: #fff7e0; color: #7a5300; padding: 3px;")
        self.stale_banner.hide()
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(options)
        self.run_list = CurveRunList()
        lay.addWidget(self.run_list)
        lay.addWidget(self.stale_banner)
        lay.addWidget(self.plots_area)

    def minimumSizeHint(self) -> QtCore.QSize:  # Qt override
        return QtCore.QSize(MIN_PLOT_WIDTH, MIN_PLOT_HEIGHT)

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:
        super().resizeEvent(event)
        self.reflow(event.size().width())

    def reflow(self, width: int) -> None:
        """Three, two or one plot(s) per row, whichever keeps each plot readable."""
        # the vertical scroll bar and the layout margins take ~30 pixels of the width
        # (and each plot needs its title's width plus the grid's spacing)
        need = max(MIN_PLOT_WIDTH, *(int(p.minimumWidth()) + 6 for p in self.plots.values()))
        columns = max(1, min(3, (width - 20) // need))
        rows = math.ceil(len(self._order) / columns)
        self.glw.setMinimumHeight(rows * MIN_PLOT_HEIGHT)
        if columns == self.columns:
            return
        self.columns = columns
        layout = self.glw.ci
        for key in self._order:
            layout.removeItem(self.plots[key])
        for i, key in enumerate(self._order):
            layout.addItem(self.plots[key], row=i // columns, col=i % columns)
        # Equal columns: linked x axes of plots with different widths show different ranges
        # (pyqtgraph aligns linked views by screen position).
        widest = max(p.minimumWidth() for p in self.plots.values())
        for plot in self.plots.values():
            plot.setMinimumWidth(widest)
            plot.setPreferredWidth(widest)
        for c in range(3):
            layout.layout.setColumnStretchFactor(c, 1 if c < columns else 0)
        # The grid keeps the old column widths until the view sets its geometry again.
        QtCore.QTimer.singleShot(0, self._fit_layout)

    def _fit_layout(self) -> None:
        self.glw.ci.setGeometry(QtCore.QRectF(self.glw.viewport().rect()))

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
                                     name=f"B{subscript(i + 1)}",
                                     connect="finite")
            for i in range(n)]
        tighten(self._legends[0])

    # ---- updates -------------------------------------------------------------------------
    def update_curves(self, store: CurveStore, live_until: int | None = None) -> None:
        """Show every point of ``store``.

        ``live_until``: during a run, the iteration the run is expected to reach. The axes
        then keep "nice" ranges that change only when the data leaves them, instead of
        auto-ranging on every update: a changed range makes all twelve axes regenerate their
        ticks and labels in Python, which held the GIL long enough to slow the solver thread
        several-fold and stall the event loop for 50–100 ms per redraw. Without it (a
        finished or stored run) the plots auto-range exactly.
        """
        if store is not self._store:
            self._clear_stage_marks()
        self._store = store
        arr = store.arrays()
        it = self.shown_x(arr[self.x_key])
        segments = store.segment_ids()
        weight = float(self.smoothing.value())
        shown: dict[str, list[np.ndarray]] = {key: [] for key in self.plots}
        for key, line in self.lines.items():
            plot = self._plot_of(key)
            y = self.shown_values(plot, arr[key], segments)
            raw = self.raw_lines[key]
            raw.setVisible(weight > 0)
            if key in SPARSE_KEYS:  # measured on some records only: join those points
                kept = np.isfinite(y) & np.isfinite(it)
                join = "all" if not store.stages else joins(segments[kept])
                line.setData(it[kept], y[kept], connect=join)
                if weight > 0:
                    y_raw = self.shown_values(plot, arr[key], segments, smoothing=0.0)
                    raw.setData(it[kept], y_raw[kept], connect=join)
            else:
                line.setData(it, y, connect=joins(segments, it, y))
                if weight > 0:
                    y_raw = self.shown_values(plot, arr[key], segments, smoothing=0.0)
                    raw.setData(it, y_raw, connect=joins(segments, it, y_raw))
            shown[plot].append(y)
        breg = arr["bregman"]
        self._ensure_layers(breg.shape[1] if breg.ndim == 2 else 0)
        for i, line in enumerate(self.layer_lines):
            y = self.shown_values("terms", breg[:, i], segments)
            line.setData(it, y, connect=joins(segments, it, y))
            shown["terms"].append(y)
        self._mark_stages(store)
        if live_until is None:
            self._release_ranges()
        else:  # the expected end is an iteration: no cap on a time axis
            self._hold_ranges(it, shown, live_until if self.x_key == "iteration" else 1e300)
        self._place_legends()

    def _place_legends(self, *_args: object) -> None:
        for key, legend in zip(("terms", "residuals"), self._legends, strict=True):
            place_legend(self.plots[key], legend)

    @staticmethod
    def _plot_of(key: str) -> str:
        return {"objective": "objective", "reg_term": "terms", "psnr": "psnr",
                "discrepancy": "discrepancy", "primal_residual": "residuals",
                "dual_residual": "residuals", "ssim": "ssim"}[key]

    # ---- view options ------------------------------------------------------------------
    def set_x_axis(self, key: str) -> None:
        """Curves against ``"iteration"`` or ``"elapsed"`` (the solver's seconds)."""
        self.x_key = key
        self.x_choice.setCurrentIndex(self.x_choice.findData(key))
        for plot in self.plots.values():
            plot.setLabel("bottom", "iteration" if key == "iteration" else "time [s]")
        self._redraw()

    def set_log_y(self, on: bool) -> None:
        """Log or linear y axes for the plots that are logarithmic by default."""
        self.log_box.setChecked(on)
        for key, plot in self.plots.items():
            self._log[key] = bool(on and self._log_default[key])
            plot.setLogMode(x=False, y=self._log[key])
        self._redraw()

    def shown_values(self, plot: str, y: np.ndarray, segments: np.ndarray | None = None,
                     smoothing: float | None = None) -> np.ndarray:
        """What a line of ``plot`` draws for the values ``y``: smoothed (within each stage:
        an average across a stage boundary mixes two problems), positive on log axes."""
        weight = float(self.smoothing.value()) if smoothing is None else smoothing
        y = np.asarray(y, dtype=np.float64)
        if weight > 0 and segments is not None and segments.size == y.size and segments.size \
                and segments[-1] != segments[0]:
            y = np.concatenate([smooth(y[segments == s], weight) for s in np.unique(segments)])
        else:
            y = smooth(y, weight)
        return _positive(y) if self._log[plot] else y

    def shown_x(self, x: np.ndarray) -> np.ndarray:
        """The x values drawn: on a log axis only positive ones (iteration 0 is no point)."""
        return _positive(x) if self.log_x else np.asarray(x, dtype=np.float64)

    def set_log_x(self, on: bool) -> None:
        """Logarithmic or linear x axes (all plots are linked)."""
        self.log_x = bool(on)
        self.logx_box.setChecked(self.log_x)
        for key, plot in self.plots.items():
            plot.setLogMode(x=self.log_x, y=self._log[key])
        self._redraw()

    def _redraw(self) -> None:
        """Draw the current store again (axes, restart marks, references) after a change."""
        self._release_ranges()
        if self._store is not None:
            self.update_curves(self._store)
        self.overlay.redraw()
        for _plot, line in (*self.restart_lines, *self.stage_lines):
            line.setValue(self._x_of(self._restart_at[id(line)]))
        self.set_references(*self._ref_values)
        self._place_mark_labels()

    def set_stale(self, message: str | None) -> None:
        """Dim the curves and say why they are not current (None: current again)."""
        self.stale = message is not None
        self.stale_banner.setText(message or "")
        self.stale_banner.setVisible(self.stale)
        for line in [*self.lines.values(), *self.layer_lines]:
            line.setOpacity(0.35 if self.stale else 1.0)

    def set_run(self, store: CurveStore) -> None:
        """Show a whole stored run (e.g. from a session): curves and restart marks."""
        self.clear()
        self.update_curves(store)
        for it, what in store.restarts:
            self.mark_restart(it, what)

    def clear(self) -> None:
        self._release_ranges()
        for line in self.lines.values():
            line.setData([], [])
        for line in self.layer_lines:
            line.setData([], [])
        for line in self.raw_lines.values():
            line.setData([], [])
        for plot, line in self.restart_lines:
            plot.removeItem(line)
        self._clear_stage_marks()
        self.restart_lines = []
        self.restarts = []
        self._restart_at = {}

    @property
    def store(self) -> CurveStore | None:
        """The curves drawn as the current run (None: none yet)."""
        return self._store

    def export_item(self) -> pg.GraphicsLayout:
        """What plot exports render (all curves as one figure)."""
        return self.glw.ci
