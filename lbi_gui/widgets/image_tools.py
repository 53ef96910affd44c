"""Contrast tools for the image grid: colour map (LUT), typed contrast limits, auto contrast
and a histogram.

What napari users reach for first: another LUT, contrast limits typed as numbers, "auto
contrast" (the levels that cover the data, ignoring a few outliers), and a histogram of the
values with the current levels marked.
The levels themselves stay on the grid's shared colour bar (drag its ends), so truth, decoder
output and iterate keep comparable grey values.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6 import QtWidgets

from lbi_gui.widgets.panel import tool_button

#: (label, pyqtgraph colour map name; "-r" = reversed), napari's usual set.
LUTS = [("Grey", "CET-L1"), ("Grey inverted", "CET-L1-r"), ("Viridis", "viridis"),
        ("Magma", "magma"), ("Inferno", "inferno"), ("Plasma", "plasma"),
        ("Cividis", "cividis"), ("Turbo", "turbo"), ("Fire", "CET-L3"),
        ("Blue", "CET-L6"), ("Green", "CET-L5")]
#: How a contrast-limit field that refused its text looks.
INVALID_EDIT = "QLineEdit { border: 2px solid #d62728; background: #fff0f0; }"


def colour_map(name: str) -> pg.ColorMap:
    """pyqtgraph's map ``name``; a trailing "-r" reverses it."""
    if name.endswith("-r"):
        cmap = pg.colormap.get(name[:-2])
        cmap.reverse()
        return cmap
    return pg.colormap.get(name)
#: Auto contrast ignores this percentage of the values at each end.
CLIP_PERCENT = 0.5
HIST_BINS = 64


def toggle_and_plot(text: str, tip: str, height: int
                    ) -> tuple[QtWidgets.QToolButton, pg.PlotWidget]:
    """A checkable tool button and the small (hidden) plot it shows under the images."""
    button = tool_button(text)
    button.setCheckable(True)
    button.setToolTip(tip)
    plot = pg.PlotWidget(background="w")
    plot.setFixedHeight(height)
    plot.hideButtons()
    plot.hide()
    return button, plot


class ContrastTools(QtWidgets.QWidget):
    """LUT combo, Auto contrast and Histogram buttons for an :class:`ImageGrid` ``grid``."""

    def __init__(self, grid: Any, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.grid = grid
        self.lut = QtWidgets.QComboBox()
        for label, name in LUTS:
            self.lut.addItem(label, name)
        self.lut.setToolTip("Colour map of truth, decoder output and iterate")
        self.lut.setSizeAdjustPolicy(
            QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.lut.setMinimumContentsLength(3)
        self.auto = tool_button("Auto")
        self.auto.setToolTip(f"Auto contrast: levels from the {CLIP_PERCENT}th to the "
                             f"{100 - CLIP_PERCENT}th percentile of the images' values")
        self.hist_button, self.hist = toggle_and_plot(
            "Hist", "Histogram: the iterate's (else the truth's) values with the display "
            "levels", height=90)
        # Typed contrast limits (napari's contrast_limits): the shared bar's levels.
        self.low, self.high = QtWidgets.QLineEdit(), QtWidgets.QLineEdit()
        for edit, which in ((self.low, "lowest"), (self.high, "highest")):
            edit.setFixedWidth(58)
            edit.setToolTip(f"Contrast limit: the {which} value shown (type a number, Enter)")
            edit.editingFinished.connect(self.apply_typed_levels)
        self.hist.setMouseEnabled(x=False, y=False)
        self.hist.getAxis("left").setStyle(showValues=False)
        self._bars = pg.BarGraphItem(x0=[], x1=[], height=[], brush="#7f9fbf", pen=None)
        self.hist.addItem(self._bars)
        self._marks = [pg.InfiniteLine(angle=90, pen=pg.mkPen("#d62728", width=1.5))
                       for _ in range(2)]
        for mark in self._marks:
            self.hist.addItem(mark)
        lay = QtWidgets.QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(1)
        lay.addWidget(self.lut)
        self._limits_menu(self.auto)
        lay.addWidget(self.auto)
        lay.addWidget(self.hist_button)
        self.lut.activated.connect(lambda _i: self.set_lut(self.lut.currentData()))
        self.auto.clicked.connect(self.auto_contrast)
        self.hist_button.toggled.connect(self._toggle_hist)
        grid.shared_bar.sigLevelsChanged.connect(lambda _bar: self.update_histogram())
        grid.shared_bar.sigLevelsChanged.connect(lambda _bar: self.show_levels())
        self.show_levels()

    def _limits_menu(self, button: QtWidgets.QToolButton) -> None:
        """The two fields in ``button``'s menu (its arrow): the row under the images has no
        room for them at 1024 pixels."""
        box = QtWidgets.QWidget()
        row = QtWidgets.QHBoxLayout(box)
        row.setContentsMargins(6, 4, 6, 4)
        for text, edit in (("min", self.low), ("max", self.high)):
            row.addWidget(QtWidgets.QLabel(text))
            row.addWidget(edit)
        menu = QtWidgets.QMenu(self)
        action = QtWidgets.QWidgetAction(menu)
        action.setDefaultWidget(box)
        menu.addAction(action)
        button.setPopupMode(QtWidgets.QToolButton.ToolButtonPopupMode.MenuButtonPopup)
        button.setMenu(menu)
        button.setToolTip(button.toolTip() + "; the arrow: type the contrast limits (lowest "
                          "and highest value shown)")

    def show_levels(self) -> None:
        """The fields follow the levels (a drag of the colour bar, Auto, a session)."""
        for edit, value in zip((self.low, self.high), self.grid.levels(), strict=True):
            if not edit.hasFocus():
                edit.setText(f"{value:.4g}")
                edit.setStyleSheet("")

    def apply_typed_levels(self) -> bool:
        """Levels from the two fields; a refusal (not numbers, low ≥ high) turns them red
        and says why, and the levels stay."""
        try:
            lo, hi = float(self.low.text().replace(",", ".")), \
                float(self.high.text().replace(",", "."))
            problem = None if np.isfinite(lo) and np.isfinite(hi) and lo < hi else \
                "the lowest value must be below the highest"
        except ValueError:
            problem = "give two numbers"
        if problem is not None:
            for edit in (self.low, self.high):
                edit.setStyleSheet(INVALID_EDIT)
                edit.setToolTip(f"Contrast limits not applied: {problem}.")
            return False
        for edit in (self.low, self.high):
            edit.setStyleSheet("")
        self.grid.set_levels((lo, hi))
        return True

    def set_lut(self, name: str) -> None:
        """Use colour map ``name`` for the three grey images (and their colour bar)."""
        cmap = colour_map(name)
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
