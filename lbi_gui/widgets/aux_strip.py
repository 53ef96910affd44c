"""A strip of the auxiliary variables x_1 … x_{L−1} of multi-layer methods.

Feature maps arrive tiled from the engine (``PreparedRun.aux_images``); each gets its own
view with per-image levels, since activations of different layers live on different scales.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from lbi_gui.imaging import to_view

#: The strip's smallest height while it shows feature maps (their titles and ~60-pixel maps).
AUX_MIN_HEIGHT = 90


class AuxStrip(QtWidgets.QWidget):
    """One small view per auxiliary variable; views are created when the count changes.

    ``hovered(text)``: the value of the auxiliary variable under the mouse ("x_1  row 3,
    col 5: 0.42", rows and columns of the tiled feature maps), "" when off every view; the
    window shows it in the images' readout line.
    """

    hovered = QtCore.Signal(str)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.glw = pg.GraphicsLayoutWidget()
        self.glw.setBackground("w")
        self.placeholder = QtWidgets.QLabel(
            "Auxiliary variables x₁ … x_{L−1} appear here for multi-layer methods.")
        self.placeholder.setStyleSheet("color: #777; padding: 6px;")
        self.placeholder.setWordWrap(True)  # its width must never widen the window
        self.placeholder.setMinimumWidth(60)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.placeholder)
        lay.addWidget(self.glw, 1)
        self.items: list[pg.ImageItem] = []
        self.plots: list[pg.PlotItem] = []
        self._titles: list[str] = []
        self._cmap = pg.colormap.get("viridis").getLookupTable(nPts=256)
        self.glw.hide()
        self.setMaximumHeight(self.placeholder.sizeHint().height() + 4)
        self.glw.scene().sigMouseMoved.connect(self._hover)

    def readout_text(self, index: int, row: int, col: int) -> str:
        image = self.items[index].image
        if image is None or not (0 <= row < image.shape[0] and 0 <= col < image.shape[1]):
            return ""
        shown = ", ".join(f"{v:.4g}" for v in np.ravel(image[row, col]))
        return f"x_{index + 1}  row {row}, col {col}: {shown}"

    def _hover(self, pos: QtCore.QPointF) -> None:
        for index, plot in enumerate(self.plots):
            if plot.isVisible() and plot.vb.sceneBoundingRect().contains(pos):
                point = plot.vb.mapSceneToView(pos)
                self.hovered.emit(self.readout_text(index, int(np.floor(point.y())),
                                                    int(np.floor(point.x()))))
                return
        self.hovered.emit("")

    def set_aux(self, images: list[np.ndarray]) -> None:
        if len(images) > len(self.items):
            self.reserve(len(images))
        for i, (item, img) in enumerate(zip(self.items, images, strict=False)):
            view = to_view(img)
            finite = view[np.isfinite(view)]
            lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
            item.setImage(view, levels=(lo, hi if hi > lo else lo + 1.0), autoLevels=False)
            title = f"x_{i + 1}  [{lo:.2g}, {hi:.2g}]"
            if self._titles[i] != title:  # setTitle re-lays out the scene: only on change
                self._titles[i] = title
                self.plots[i].setTitle(title, size="8pt")
        for plot in self.plots[len(images):]:
            if plot.isVisible():
                plot.hide()
        for plot in self.plots[:len(images)]:
            if not plot.isVisible():
                plot.show()
        self.placeholder.setVisible(not images)
        self.glw.setVisible(bool(images))
        # Empty, the strip is one line high, so the images above get the room.
        self.setMaximumHeight(16777215 if images else self.placeholder.sizeHint().height() + 4)
        self.setMinimumHeight(AUX_MIN_HEIGHT if images else 24)

    def reserve(self, n: int) -> None:
        """Have at least ``n`` views ready (hidden until used).

        Why: creating plot items takes tens of milliseconds on the GUI thread; the window
        reserves them when a problem is prepared, so the first updates of a run never stall
        the event loop, and views are hidden rather than destroyed between runs.
        """
        for i in range(len(self.items), n):
            plot = self.glw.addPlot(row=0, col=i)
            for axis in ("left", "bottom"):
                plot.hideAxis(axis)
            plot.setAspectLocked(True)
            plot.invertY(True)
            plot.hideButtons()
            plot.setMenuEnabled(False)
            item = pg.ImageItem(axisOrder="row-major")
            item.setLookupTable(self._cmap)
            plot.addItem(item)
            plot.hide()
            self.items.append(item)
            self.plots.append(plot)
            self._titles.append("")

    def clear(self) -> None:
        for item in self.items:
            item.clear()
        self.set_aux([])
