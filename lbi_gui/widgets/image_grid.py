"""The central images: ground truth, decoder output, current iterate and error map.

Truth, decoder output and iterate share one colour bar (levels and colour map), so their
grey values compare directly; the signed error has its own diverging bar. Views are linked:
zooming one zooms all. Images are updated in place with ``setImage``.

The views refit to the image whenever the widget is resized or a new image size arrives,
unless the user zoomed by hand (then "Fit" brings the whole image back). Titles switch to
short forms when the columns are too narrow for the long ones, so they never overprint. The
line under the images reads out the pixel under the mouse: row, column and the value of
every image there (truth, decoder output, iterate, error).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from lbi_gui.imaging import error_map, to_view
from lbi_gui.widgets.image_tools import ContrastTools
from lbi_gui.widgets.line_profile import LineProfile
from lbi_gui.widgets.panel import tool_button

TITLES = {"truth": "Ground truth x†", "decoder": "Decoder D(y^δ)",
          "iterate": "Iterate x", "error": "Error x − x†"}
#: What a title says when its column is too narrow for the long form.
SHORT_TITLES = {"truth": "x†", "decoder": "D(y^δ)", "iterate": "x", "error": "x − x†"}
TITLE_SIZE = "10pt"
#: Width (pixels) a colour bar's column takes beside the views, with its tick labels.
BAR_ROOM = 60
#: Height (pixels) of the tool row under the views (read-out, Hist, Profile, Fit).
TOOLS_ROOM = 28
#: The smallest side (pixels) an image view may be squeezed to by docks or splitters: below
#: it a 28x28 digit is a smudge and a colour bar's labels overprint.
MIN_VIEW = 80
#: Room for a view's two-line title above its image.
TITLE_ROOM = 36


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
                                          width=14, interactive=True)
        self.shared_bar.setImageItem([self.items[k] for k in ("truth", "decoder", "iterate")])
        self.glw.addItem(self.shared_bar, row=0, col=3)
        self.error_bar = pg.ColorBarItem(values=(-0.5, 0.5), colorMap=pg.colormap.get("CET-D1"),
                                         width=14, interactive=True)
        self.error_bar.setImageItem(self.items["error"])
        self.glw.addItem(self.error_bar, row=0, col=5)
        for col in (0, 1, 2, 4):
            self.glw.ci.layout.setColumnStretchFactor(col, 1)
        self.readout = QtWidgets.QLabel(" ")
        self.readout.setObjectName("pixelReadout")
        self.readout.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.readout.setMinimumWidth(20)  # long read-outs are cut, never widen the window
        self.fit_button = tool_button("Fit")
        self.fit_button.setToolTip("Show the whole image in every view (F)")
        self.fit_button.clicked.connect(self.fit_view)
        row = QtWidgets.QHBoxLayout()
        row.setContentsMargins(4, 0, 4, 0)
        row.addWidget(self.readout, 1)
        self.tools = ContrastTools(self)
        self.profile = LineProfile(self)
        row.addWidget(self.tools)
        row.addWidget(self.profile)
        row.addWidget(self.fit_button)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.glw, 1)
        lay.addLayout(row)
        lay.addWidget(self.tools.hist)
        lay.addWidget(self.profile.plot)
        self._titles: dict[str, str] = {}
        self._long: dict[str, str] = {}  # the long title of each view (what _title was given)
        self._short = False
        self.stale = False
        self.rows = 1
        self.glw.setMinimumHeight(MIN_VIEW + TITLE_ROOM)
        self.user_zoomed = False  # True after a manual zoom/pan: resizes then keep the view
        self._image_shape: tuple[int, int] | None = None
        for plot in self.plots.values():
            plot.vb.sigRangeChangedManually.connect(self._zoomed_by_hand)
        self.glw.scene().sigMouseMoved.connect(self._hover)
        self._refit = QtCore.QTimer(self, singleShot=True, interval=0)
        self._refit.timeout.connect(self._refit_now)
        self.truth: np.ndarray | None = None
        self.iterate: np.ndarray | None = None
        self._error_auto = True
        self.error_bar.sigLevelsChangeFinished.connect(self._error_levels_touched)

    def _title(self, key: str, text: str) -> None:
        """Set a title only when it changed (setTitle re-lays out the whole scene)."""
        self._long[key] = text
        if self._short:
            head, _sep, tail = text.partition("<br>")
            for long_name, short in ((TITLES[key], SHORT_TITLES[key]),
                                     ("Ground truth (unknown)", "x† unknown"),
                                     ("Decoder (none)", "no decoder")):
                head = head.replace(long_name, short)
            text = f"{head}<br>{tail}"
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
        if key == "iterate":
            self._changed()

    def _changed(self) -> None:
        if self.tools.hist.isVisible():
            self.tools.update_histogram()
        if self.profile.plot.isVisible():
            self.profile.update_profile()

    def set_truth(self, img: np.ndarray | None) -> None:
        self.truth = None if img is None else np.asarray(img)
        self._set("truth", img)
        self._title("truth", (TITLES["truth"] if img is not None
                                      else "Ground truth (unknown)") + "<br>")
        self._update_error()
        self._note_shape(img)

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
        self._note_shape(img)

    def _update_error(self) -> None:
        err = None
        if self.iterate is not None and self.truth is not None:
            err = error_map(self.iterate, self.truth)
        rgb = err is not None and to_view(err).ndim == 3
        if rgb and err is not None:
            # a signed RGB error has no colour bar that describes it: its magnitude per
            # pixel, on a sequential bar from 0
            err = np.sqrt(np.sum(to_view(err) ** 2, axis=-1))
        self._rgb(rgb)
        if err is not None and self._error_auto:
            m = float(np.nanmax(np.abs(err))) if err.size else 0.0
            m = m if m > 0 else 1e-3
            self.error_bar.setLevels((0.0, m) if rgb else (-m, m))
        self._set("error", err)
        rms = float(np.sqrt(np.mean(err ** 2))) if err is not None else None
        name = "|x − x†| (RGB)" if rgb else TITLES["error"]
        self._title("error", name + (f"<br>RMS {rms:.2g}" if rms else "<br>"))

    def _rgb(self, rgb: bool) -> None:
        """Colour images: the error bar is sequential (a magnitude) and the colour map
        combo is off (maps apply to grey values only; the value bar then shows the levels)."""
        if rgb == getattr(self, "_is_rgb", False):
            return
        self._is_rgb = rgb
        self.error_bar.setColorMap(pg.colormap.get("CET-L3" if rgb else "CET-D1"))
        self.tools.lut.setEnabled(not rgb)
        self.tools.lut.setToolTip("Colour images are shown in their own colours: a colour "
                                  "map applies to grey images only" if rgb else
                                  "Colour map of truth, decoder output and iterate")

    def _error_levels_touched(self) -> None:
        self._error_auto = False  # the user dragged the error bar: keep their levels

    def set_stale(self, stale: bool) -> None:
        """Dim the iterate and error (a result of other parameters than those on screen)."""
        self.stale = stale
        for key in ("iterate", "error"):
            self.items[key].setOpacity(0.3 if stale else 1.0)
        long = self._long.get("iterate", TITLES["iterate"] + "<br>")
        head, _sep, tail = long.partition("<br>")
        head = head.replace(" — stale", "")
        self._title("iterate", (head + " — stale" if stale else head) + "<br>" + tail)

    # ---- view ----------------------------------------------------------------------------
    def _note_shape(self, img: np.ndarray | None) -> None:
        """Refit when an image of another size arrives (a new network, a measured y)."""
        if img is None:
            return
        shape = to_view(img).shape[:2]
        if shape != self._image_shape:
            self._image_shape = (int(shape[0]), int(shape[1]))
            self.fit_view()

    def image_rect(self) -> QtCore.QRectF | None:
        """Bounds of the images on screen (any view that has one: truth may be unknown)."""
        for key in ("truth", "iterate", "decoder", "error"):
            item = self.items[key]
            if item.image is not None:
                return QtCore.QRectF(0, 0, float(item.width()), float(item.height()))
        return None

    def fit_view(self) -> None:
        """Show the whole image in every (linked) view; forget a manual zoom."""
        self.user_zoomed = False
        rect = self.image_rect()
        if rect is not None:
            self.plots["truth"].vb.setRange(rect, padding=0.0)

    def _zoomed_by_hand(self, *_args: object) -> None:
        self.user_zoomed = True

    def _refit_now(self) -> None:
        self._choose_titles()
        if not self.user_zoomed:
            self.fit_view()

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:
        super().resizeEvent(event)
        self.reflow(event.size().width(), event.size().height() - self._below_views())
        self._refit.start()  # after the scene has laid out at the new size

    def _below_views(self) -> int:
        """Height taken under the views: the tool row, and the histogram and line profile
        while shown."""
        extra = [w.height() for w in (self.tools.hist, self.profile.plot) if w.isVisible()]
        return TOOLS_ROOM + sum(extra)

    @staticmethod
    def best_rows(width: int, height: int) -> int:
        """1 (four views in a row) or 2 (two rows of two): whichever draws the images larger
        in ``width`` × ``height`` pixels (square images: the smaller side of a view counts)."""
        one = min((width - 2 * BAR_ROOM) / 4, height - TITLE_ROOM)
        two = min((width - BAR_ROOM) / 2, height / 2 - TITLE_ROOM)
        return 1 if one >= two else 2

    def reflow(self, width: int, height: int | None = None) -> None:
        """The arrangement of the four views that draws them largest (no view is cut)."""
        rows = self.best_rows(width, height if height is not None else width // 2)
        if rows == self.rows:
            return
        self.rows = rows
        self.glw.setMinimumHeight(rows * (MIN_VIEW + TITLE_ROOM))
        ci = self.glw.ci
        items = [self.plots["truth"], self.plots["decoder"], self.plots["iterate"],
                 self.shared_bar, self.plots["error"], self.error_bar]
        for item in items:
            ci.removeItem(item)
        places = ([(0, c) for c in range(6)] if rows == 1 else
                  [(0, 0), (0, 1), (1, 0), (0, 2), (1, 1), (1, 2)])
        for item, (r, c) in zip(items, places, strict=True):
            ci.addItem(item, row=r, col=c)
        for col in range(6):
            stretch = (1 if col in (0, 1, 2, 4) else 0) if rows == 1 else (1 if col < 2 else 0)
            ci.layout.setColumnStretchFactor(col, stretch)
        QtCore.QTimer.singleShot(0, self._fit_scene)

    def _fit_scene(self) -> None:
        self.glw.ci.setGeometry(QtCore.QRectF(self.glw.viewport().rect()))

    def _choose_titles(self) -> None:
        """Short titles when the widest long title does not fit its column."""
        metrics = QtGui.QFontMetrics(self.font())
        widest = max(metrics.horizontalAdvance(TITLES[k]) for k in TITLES) * 1.15 + 8
        column = min(p.vb.sceneBoundingRect().width() for p in self.plots.values())
        short = column < widest
        if short != self._short:
            self._short = short
            for key, text in list(self._long.items()):
                self._title(key, text)

    def _hover(self, pos: QtCore.QPointF) -> None:
        """Row and column of the pixel under the mouse, and the value of every image there
        (truth, decoder output, iterate, error: napari's layer readout)."""
        for key, plot in self.plots.items():
            if not plot.vb.sceneBoundingRect().contains(pos):
                continue
            image = self.items[key].image
            if image is None:
                break
            point = plot.vb.mapSceneToView(pos)
            col, row = int(np.floor(point.x())), int(np.floor(point.y()))
            if 0 <= row < image.shape[0] and 0 <= col < image.shape[1]:
                self.readout.setText(self.readout_text(row, col))
                return
            break
        self.readout.setText(" ")

    def readout_text(self, row: int, col: int) -> str:
        """"row r, col c:  x† 0.52  D(y^δ) 0.5  x 0.48  x − x† −0.04" for one pixel."""
        parts = [f"row {row}, col {col}:"]
        for key in ("truth", "decoder", "iterate", "error"):
            image = self.items[key].image
            if image is None or not (row < image.shape[0] and col < image.shape[1]):
                continue
            shown = ", ".join(f"{v:.4g}" for v in np.ravel(image[row, col]))
            parts.append(f"{SHORT_TITLES[key]} {shown}")
        return "  ".join(parts)

    # ---- queries -------------------------------------------------------------------------
    def view_sizes(self) -> dict[str, tuple[float, float]]:
        """Width and height (pixels) of each image view's drawing area."""
        return {key: (plot.vb.width(), plot.vb.height()) for key, plot in self.plots.items()}

    def readable(self) -> bool:
        """Every view at least nearly MIN_VIEW on its shorter side (a layout squeezed below
        that is not worth saving; see MainWindow.save_layout)."""
        return all(min(size) >= 0.8 * MIN_VIEW for size in self.view_sizes().values())

    def levels(self) -> tuple[float, float]:
        """The shared display levels (what an 8-bit export maps to 0 and 255)."""
        lo, hi = self.shared_bar.levels()
        return float(lo), float(hi)

    def set_levels(self, levels: tuple[float, float]) -> None:
        self.shared_bar.setLevels(tuple(levels))
        self.tools.show_levels()  # the bar signals only a user's drag
