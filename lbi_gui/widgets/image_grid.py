"""The central images: ground truth, decoder output, current iterate and error map.

Truth, decoder output and iterate share one colour bar (levels and colour map), so their
grey values compare directly; the signed error has its own diverging bar. Views are linked:
zooming one zooms all. Images are updated in place with ``setImage``.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtWidgets

from lbi_gui.imaging import error_map, to_view

TITLES = {"truth": "Ground truth x†", "decoder": "Decoder D(y^δ)",
          "iterate": "Iterate x", "error": "Error x − x†"}
TITLE_SIZE = "10pt"


class ImageGrid(QtWidgets.QWidget):
    """Four linked image views with two colour bars."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.glw = pg.GraphicsLayoutWidget()
        self.glw.setBackground("w")
        self.glw.ci.setSpacing(4)
        self.plots: dict[str, pg.PlotItem] = {}
        self.items: dict[str, pg.ImageItem] = {}
        for col, key in enumerate(("truth", "decoder", "iterate", "error")):
            plot = self.glw.addPlot(row=0, col=col if col < 3 else col + 1)
            plot.setTitle(TITLES[key] + "<br>", size=TITLE_SIZE)
            plot.setMinimumWidth(60)
            plot.setPreferredWidth(220)
            for axis in ("left", "bottom"):
                plot.hideAxis(axis)
            plot.setAspectLocked(True)
            plot.invertY(True)
            plot.hideButtons()
            plot.setMenuEnabled(False)
            item = pg.ImageItem(axisOrder="row-major")
            plot.addItem(item)
            self.plots[key], self.items[key] = plot, item
            if key != "truth":
                plot.setXLink(self.plots["truth"])
                plot.setYLink(self.plots["truth"])
        self.shared_bar = pg.ColorBarItem(values=(0.0, 1.0), colorMap=pg.colormap.get("CET-L1"),
                                          width=14, interactive=True, label="value")
        self.shared_bar.setImageItem([self.items[k] for k in ("truth", "decoder", "iterate")])
        self.glw.addItem(self.shared_bar, row=0, col=3)
        self.error_bar = pg.ColorBarItem(values=(-0.5, 0.5), colorMap=pg.colormap.get("CET-D1"),
                                         width=14, interactive=True, label="error")
        self.error_bar.setImageItem(self.items["error"])
        self.glw.addItem(self.error_bar, row=0, col=5)
        for col in (0, 1, 2, 4):
            self.glw.ci.layout.setColumnStretchFactor(col, 1)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.glw)
        self._titles: dict[str, str] = {}
        self.truth: np.ndarray | None = None
        self.iterate: np.ndarray | None = None
        self._error_auto = True
        self.error_bar.sigLevelsChangeFinished.connect(self._error_levels_touched)

    def _title(self, key: str, text: str) -> None:
        """Set a title only when it changed (setTitle re-lays out the whole scene)."""
        if self._titles.get(key) != text:
            self._titles[key] = text
            self.plots[key].setTitle(text, size=TITLE_SIZE)

    # ---- data ----------------------------------------------------------------------------
    def _set(self, key: str, img: np.ndarray | None) -> None:
        item = self.items[key]
        if img is None:
            item.clear()
            return
        item.setImage(to_view(img), autoLevels=False)
        bar = self.error_bar if key == "error" else self.shared_bar
        item.setLevels(bar.levels())
        if key != "error":
            item.setLookupTable(bar.colorMap().getLookupTable(nPts=256))

    def set_truth(self, img: np.ndarray | None) -> None:
        self.truth = None if img is None else np.asarray(img)
        self._set("truth", img)
        self._title("truth", (TITLES["truth"] if img is not None
                                      else "Ground truth (unknown)") + "<br>")
        self._update_error()
        if img is not None:
            self.plots["truth"].autoRange(padding=0.02)

    def set_decoder(self, img: np.ndarray | None, psnr: float | None = None) -> None:
        self._set("decoder", img)
        if img is None:
            title = "Decoder (none)<br>"
        else:
            title = TITLES["decoder"] + (f"<br>{psnr:.2f} dB" if psnr is not None else "<br>")
        self._title("decoder", title)

    def set_iterate(self, img: np.ndarray | None, iteration: int | None = None,
                    psnr: float | None = None) -> None:
        self.iterate = None if img is None else np.asarray(img)
        self._set("iterate", img)
        title = TITLES["iterate"] + (f" (k = {iteration})" if iteration is not None else "")
        title += f"<br>{psnr:.2f} dB" if psnr is not None and np.isfinite(psnr) else "<br>"
        self._title("iterate", title)
        self._update_error()
        if img is not None and self.truth is None:
            self.plots["truth"].autoRange(padding=0.02)

    def _update_error(self) -> None:
        err = None
        if self.iterate is not None and self.truth is not None:
            err = error_map(self.iterate, self.truth)
        if err is not None and self._error_auto:
            m = float(np.nanmax(np.abs(err))) if err.size else 0.0
            m = m if m > 0 else 1e-3
            self.error_bar.setLevels((-m, m))
        self._set("error", err)
        rms = float(np.sqrt(np.mean(err ** 2))) if err is not None else None
        self._title("error", TITLES["error"] + (f"<br>RMS {rms:.2g}" if rms else "<br>"))

    def _error_levels_touched(self) -> None:
        self._error_auto = False  # the user dragged the error bar: keep their levels

    # ---- queries -------------------------------------------------------------------------
    def levels(self) -> tuple[float, float]:
        """The shared display levels (what an 8-bit export maps to 0 and 255)."""
        lo, hi = self.shared_bar.levels()
        return float(lo), float(hi)

    def set_levels(self, levels: tuple[float, float]) -> None:
        self.shared_bar.setLevels(tuple(levels))
