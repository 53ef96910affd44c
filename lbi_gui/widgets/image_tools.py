"""Contrast tools for the image grid: colour map (LUT), auto contrast and a histogram.

What napari users reach for first: another LUT, "auto contrast" (the levels that cover the
data, ignoring a few outliers), and a histogram of the values with the current levels marked.
The levels themselves stay on the grid's shared colour bar (drag its ends), so truth, decoder
output and iterate keep comparable grey values.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6 import QtWidgets

#: (label, pyqtgraph colour map name)
LUTS = [("Grey", "CET-L1"), ("Viridis", "viridis"), ("Magma", "magma"),
        ("Inferno", "inferno")]
#: Auto contrast ignores this percentage of the values at each end.
CLIP_PERCENT = 0.5
HIST_BINS = 64


class ContrastTools(QtWidgets.QWidget):
    """LUT combo, Auto contrast and Histogram buttons for an :class:`ImageGrid` ``grid``."""

    def __init__(self, grid: Any, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.grid = grid
        self.lut = QtWidgets.QComboBox()
        for label, name in LUTS:
            self.lut.addItem(label, name)
        self.lut.setToolTip("Colour map of truth, decoder output and iterate")
        self.auto = QtWidgets.QToolButton(text="Auto")
        self.auto.setToolTip(f"Auto contrast: levels from the {CLIP_PERCENT}th to the "
                             f"{100 - CLIP_PERCENT}th percentile of the images' values")
        self.hist_button = QtWidgets.QToolButton(text="Hist")
        self.hist_button.setCheckable(True)
        self.hist_button.setToolTip("Histogram: the iterate's (else the truth's) values with "
                                    "the display levels")
        self.hist = pg.PlotWidget(background="w")
        self.hist.setFixedHeight(90)
        self.hist.hideButtons()
        self.hist.setMouseEnabled(x=False, y=False)
        self.hist.getAxis("left").setStyle(showValues=False)
        self.hist.hide()
        self._bars = pg.BarGraphItem(x0=[], x1=[], height=[], brush="#7f9fbf", pen=None)
        self.hist.addItem(self._bars)
        self._marks = [pg.InfiniteLine(angle=90, pen=pg.mkPen("#d62728", width=1.5))
                       for _ in range(2)]
        for mark in self._marks:
            self.hist.addItem(mark)
        lay = QtWidgets.QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.lut)
        lay.addWidget(self.auto)
        lay.addWidget(self.hist_button)
        self.lut.activated.connect(lambda _i: self.set_lut(self.lut.currentData()))
        self.auto.clicked.connect(self.auto_contrast)
        self.hist_button.toggled.connect(self._toggle_hist)
        grid.shared_bar.sigLevelsChanged.connect(lambda _bar: self.update_histogram())

    def set_lut(self, name: str) -> None:
        """Use colour map ``name`` for the three grey images (and their colour bar)."""
        cmap = pg.colormap.get(name)
        self.lut.setCurrentIndex(max(0, self.lut.findData(name)))
        self.grid.shared_bar.setColorMap(cmap)
        table = cmap.getLookupTable(nPts=256)
        for key in ("truth", "decoder", "iterate"):
            self.grid.items[key].setLookupTable(table)

    def _values(self) -> np.ndarray:
        images = [self.grid.items[k].image for k in ("truth", "decoder", "iterate")]
        finite = [np.asarray(a, dtype=np.float64).ravel() for a in images if a is not None]
        values = np.concatenate(finite) if finite else np.zeros(0)
        return values[np.isfinite(values)]

    def auto_contrast(self) -> tuple[float, float] | None:
        """Levels covering the images' values without the extreme CLIP_PERCENT at each end."""
        values = self._values()
        if not values.size:
            return None
        lo, hi = np.percentile(values, [CLIP_PERCENT, 100 - CLIP_PERCENT])
        if hi <= lo:
            hi = lo + 1e-6
        self.grid.set_levels((float(lo), float(hi)))
        return float(lo), float(hi)

    def _toggle_hist(self, on: bool) -> None:
        self.hist.setVisible(on)
        self.update_histogram()

    def histogram_source(self) -> np.ndarray | None:
        for key in ("iterate", "truth"):
            image = self.grid.items[key].image
            if image is not None:
                return np.asarray(image, dtype=np.float64)
        return None

    def update_histogram(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Redraw the histogram (when shown); returns (counts, bin edges)."""
        lo, hi = self.grid.levels()
        for mark, value in zip(self._marks, (lo, hi), strict=True):
            mark.setValue(value)
        if not self.hist.isVisible():
            return None
        data = self.histogram_source()
        if data is None:
            self._bars.setOpts(x0=[], x1=[], height=[])
            return None
        data = data[np.isfinite(data)]
        counts, edges = np.histogram(data, bins=HIST_BINS)
        self._bars.setOpts(x0=edges[:-1], x1=edges[1:], height=counts)
        self.hist.setXRange(min(float(edges[0]), lo), max(float(edges[-1]), hi), padding=0.02)
        return counts, edges
