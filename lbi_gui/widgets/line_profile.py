"""Line profile: the values of truth and iterate along a segment the user drags on the iterate.

A quick check a person makes by eye (is an edge sharp, is a stroke as bright as in the truth)
turned into numbers: the segment's two ends are draggable; the plot under the images shows
both profiles against the distance along the segment in pixels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6 import QtWidgets

from lbi_gui.widgets.image_tools import toggle_and_plot


class LineProfile(QtWidgets.QWidget):
    """A toggle button; when on, a segment on the grid's iterate view and a profile plot."""

    def __init__(self, grid: Any, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.grid = grid
        self.button, self.plot = toggle_and_plot(
            "Profile", "Line profile: drag the segment's ends on the iterate; truth and "
            "iterate values along it are plotted below", height=110)
        self.plot.setLabel("bottom", "distance along the line [pixels]")
        self.plot.addLegend(offset=(-5, 5), labelTextSize="7pt")
        self.lines = {"truth": self.plot.plot([], [], pen=pg.mkPen("#333333", width=1.5),
                                              name="truth"),
                      "iterate": self.plot.plot([], [], pen=pg.mkPen("#1f77b4", width=1.5),
                                                name="iterate")}
        self.roi: pg.LineSegmentROI | None = None
        lay = QtWidgets.QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.button)
        self.button.toggled.connect(self.set_enabled)

    def set_enabled(self, on: bool) -> None:
        self.button.setChecked(on)
        self.plot.setVisible(on)
        view = self.grid.plots["iterate"]
        if on and self.roi is None:
            rect = self.grid.image_rect()
            w, h = (rect.width(), rect.height()) if rect is not None else (16.0, 16.0)
            row = float(int(h // 2)) + 0.5  # through the centres of the middle row
            self.roi = pg.LineSegmentROI([(0.5, row), (w - 0.5, row)],
                                         pen=pg.mkPen("#ff7f0e", width=2))
            view.addItem(self.roi)
            self.roi.sigRegionChanged.connect(lambda _roi: self.update_profile())
        elif not on and self.roi is not None:
            view.removeItem(self.roi)
            self.roi = None
        self.update_profile()

    def set_segment(self, start: tuple[float, float], end: tuple[float, float]) -> None:
        """Move the segment (view coordinates: x = column, y = row)."""
        if self.roi is None:
            self.set_enabled(True)
        assert self.roi is not None
        self.roi.movePoint(self.roi.getHandles()[0], start, finish=False)
        self.roi.movePoint(self.roi.getHandles()[1], end)
        self.update_profile()

    def endpoints(self) -> tuple[tuple[float, float], tuple[float, float]] | None:
        """The segment's ends in view coordinates (x = column, y = row; a pixel's centre is
        at its index + 0.5)."""
        if self.roi is None:
            return None
        a, b = (self.roi.mapToParent(p) for p in self.roi.listPoints())
        return (a.x(), a.y()), (b.x(), b.y())

    def profiles(self) -> dict[str, np.ndarray]:
        """Values of truth and iterate along the segment, bilinear, one sample per pixel of
        length (both ends included); NaN outside the image."""
        ends = self.endpoints()
        out: dict[str, np.ndarray] = {}
        if ends is None:
            return out
        for key in ("truth", "iterate"):
            image = self.grid.items[key].image
            if image is not None and np.ndim(image) == 2:
                out[key] = sample_line(np.asarray(image, dtype=np.float64), *ends)
        return out

    def update_profile(self) -> None:
        data = self.profiles() if self.plot.isVisible() else {}
        for key, line in self.lines.items():
            y = data.get(key)
            line.setData([] if y is None else np.arange(y.size), [] if y is None else y)


def sample_line(image: np.ndarray, start: tuple[float, float],
                end: tuple[float, float]) -> np.ndarray:
    """Bilinear samples of ``image`` (rows, cols) from ``start`` to ``end`` (view coordinates,
    pixel centres at index + 0.5), one per pixel of length."""
    (x0, y0), (x1, y1) = start, end
    n = int(np.ceil(np.hypot(x1 - x0, y1 - y0))) + 1
    t = np.linspace(0.0, 1.0, n)
    cols, rows = x0 + t * (x1 - x0) - 0.5, y0 + t * (y1 - y0) - 0.5
    h, w = image.shape
    inside = (cols >= 0) & (cols <= w - 1) & (rows >= 0) & (rows <= h - 1)
    c0 = np.clip(np.floor(cols).astype(int), 0, max(0, w - 2))
    r0 = np.clip(np.floor(rows).astype(int), 0, max(0, h - 2))
    fc, fr = np.clip(cols - c0, 0, 1), np.clip(rows - r0, 0, 1)
    c1, r1 = np.minimum(c0 + 1, w - 1), np.minimum(r0 + 1, h - 1)
    top = image[r0, c0] * (1 - fc) + image[r0, c1] * fc
    bottom = image[r1, c0] * (1 - fc) + image[r1, c1] * fc
    values = top * (1 - fr) + bottom * fr
    return np.where(inside, values, np.nan)
