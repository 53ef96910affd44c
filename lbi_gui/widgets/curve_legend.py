"""The curves' legends: small, in the emptiest corner of their plot.

pyqtgraph's default legend has 20 × 20-px samples and 9-pt text: with αR and three layers'
Bregman terms it covered half of a plot of the minimum height, over the curves. Here: 14 × 8
samples, 7-pt text without the text document's margins, two entries per row, a see-through
background, and each legend moved to the corner of its view that holds the fewest curve
points whenever the data or the range change.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui

#: Legend entries per row: two rows hold αR and three layers' Bregman terms.
LEGEND_COLUMNS = 2
#: Legend offsets (pixels from the view's corner), in the order tried when counts tie.
LEGEND_CORNERS = ((-4, 4), (4, -4), (4, 4), (-4, -4))  # top right, bottom left, ...
_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def subscript(n: int) -> str:
    """``n`` in subscript digits (legend names: B₁, B₂, ...)."""
    return str(n).translate(_SUBSCRIPTS)


def tighten(legend: pg.LegendItem) -> None:
    """Labels without the text document's 4-px margin: rows as tall as the text."""
    for _sample, label in legend.items:
        if label.item.document().documentMargin() != 0:
            label.item.document().setDocumentMargin(0)
            label.setText(label.text)  # recomputes the label's size from the tighter text
    # the rows keep their old height until the layout runs again in a geometry that does
    # not stretch them: shrink, lay out, then let the legend size itself to its rows
    legend.setGeometry(0, 0, 1, 1)
    legend.layout.activate()
    legend.updateSize()


class CompactSample(pg.ItemSample):
    """A legend sample 14 × 8 px instead of pyqtgraph's 20 × 20: the rows are then as tall as
    their 7-pt text, and four entries fit in a plot of the minimum height (a larger legend
    covered half of a small plot). A click still hides the curve."""

    def __init__(self, item: pg.GraphicsObject) -> None:
        super().__init__(item)
        self.setFixedWidth(14)  # the layout reads these, not boundingRect
        self.setFixedHeight(8)

    def boundingRect(self) -> QtCore.QRectF:
        return QtCore.QRectF(0, 0, 14, 8)

    def paint(self, p: QtGui.QPainter, *args: object) -> None:
        p.setPen(pg.mkPen(self.item.opts["pen"]) if self.item.isVisible()
                 else pg.mkPen("#bbbbbb", style=QtCore.Qt.PenStyle.DotLine))
        p.drawLine(QtCore.QPointF(0, 4), QtCore.QPointF(14, 4))


def add_legend(plot: pg.PlotItem) -> pg.LegendItem:
    """A compact legend for ``plot`` (its items are added as named curves are plotted)."""
    legend = plot.addLegend(offset=LEGEND_CORNERS[0], labelTextSize="7pt",
                            sampleType=CompactSample, colCount=LEGEND_COLUMNS, horSpacing=6)
    legend.setBrush(pg.mkBrush(255, 255, 255, 190))  # see-through: curves stay readable
    legend.layout.setVerticalSpacing(0)
    legend.layout.setContentsMargins(2, 0, 2, 0)
    tighten(legend)
    return legend


def place_legend(plot: pg.PlotItem, legend: pg.LegendItem) -> None:
    """Put ``legend`` in the corner of the view that holds the fewest curve points (a fixed
    corner covered the curves of some runs)."""
    vb = plot.vb
    view, width, height = vb.viewRect(), vb.width(), vb.height()
    if width <= 0 or height <= 0 or view.width() <= 0 or view.height() <= 0:
        return
    us, vs = [], []
    for item in plot.listDataItems():
        x, y = item.getData()
        if x is not None and len(x):
            us.append((np.asarray(x, float) - view.left()) / view.width())
            vs.append((np.asarray(y, float) - view.top()) / view.height())
    if not us:
        return
    u, v = np.concatenate(us), np.concatenate(vs)  # 0..1 across the view, v upwards
    fu, fv = (legend.width() + 8) / width, (legend.height() + 8) / height
    near_u = {1: u <= fu, -1: u >= 1 - fu}  # offset sign -> the points in that column
    near_v = {1: v >= 1 - fv, -1: v <= fv}  # a positive y offset is the top
    counts = [int(np.count_nonzero(near_u[np.sign(ox)] & near_v[np.sign(oy)]))
              for ox, oy in LEGEND_CORNERS]
    best = LEGEND_CORNERS[counts.index(min(counts))]
    if tuple(legend.opts["offset"]) != best:
        legend.setOffset(best)
