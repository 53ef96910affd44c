"""Lines drawn over the curves: stage marks (layer-wise stages, the alpha search's solves),
warm-restart marks and the reference levels (decoder PSNR, noise norm), with their labels."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore

from lbi_gui.model.runs import CurveStore

#: Heights (fraction of the plot, from the bottom) of successive restart labels.
RESTART_LABEL_ROWS = (0.95, 0.70, 0.45, 0.20)
RESTART_PEN = pg.mkPen("#ff7f0e", width=1.5, style=QtCore.Qt.PenStyle.DashLine)
#: Stage marks (layer-wise stages, the alpha search's solves): thin dotted grey lines.
STAGE_PEN = pg.mkPen("#6b6b6b", width=1, style=QtCore.Qt.PenStyle.DotLine)
#: Longest mark label on the plot (the whole text is in the line's tooltip).
MARK_LABEL_CHARS = 16
#: Pixels between two labels of one row (about a label's width at 7 pt).
MARK_LABEL_GAP = 90


def short_label(text: str) -> str:
    """A mark's label as the plot shows it (the line's tooltip has the whole text)."""
    text = " ".join(str(text).split())
    return text if len(text) <= MARK_LABEL_CHARS else text[: MARK_LABEL_CHARS - 1] + "…"


def stage_label(name: str) -> str:
    """A stage's short name: "layer 2/3", "α 0.0124" for a search solve, "α 0.0076 (discr…"
    for the solve at the chosen alpha."""
    name = " ".join(str(name).split())
    if name.startswith("alpha search:"):
        return "α " + name.removeprefix("alpha search:").strip()
    if name.startswith("alpha "):
        return short_label("α " + name.removeprefix("alpha "))
    return short_label(name or "run")


def _label_opts(number: int, colour: str) -> dict:
    """Mark labels step down the plot one row per mark, so neighbours never overprint."""
    return {"position": RESTART_LABEL_ROWS[number % len(RESTART_LABEL_ROWS)], "color": colour,
            "fill": (255, 255, 255, 200), "anchors": [(0, 0.5), (0, 0.5)]}


class CurveMarks:
    """The mark and reference lines of a :class:`~lbi_gui.widgets.curves.CurvesPanel`
    (a mixin over the panel's plots and x axis)."""

    plots: dict[str, pg.PlotItem]
    _log: dict[str, bool]
    x_key: str
    log_x: bool
    _store: CurveStore | None
    stage_lines: list[tuple[pg.PlotItem, pg.InfiniteLine]]
    _stage_count: int
    restart_lines: list[tuple[pg.PlotItem, pg.InfiniteLine]]
    restarts: list[tuple[int, str]]
    _restart_at: dict[int, int]
    _refs: list[tuple[pg.PlotItem, pg.InfiniteLine]]
    _ref_values: tuple[float | None, float | None]

    # ---- stage marks ---------------------------------------------------------------------
    def _mark_stages(self, store: CurveStore) -> None:
        """A dotted vertical line where each stage begins (layer-wise stages, the alpha
        search's solves), labelled on the objective plot; drawn once per stage."""
        marks = store.stage_marks()
        if len(marks) == self._stage_count:
            return
        for number, (iteration, name) in enumerate(marks[self._stage_count:],
                                                   start=self._stage_count):
            label = stage_label(name)
            for key, plot in self.plots.items():
                line = pg.InfiniteLine(pos=self._x_of(iteration), angle=90, pen=STAGE_PEN,
                                       movable=False,
                                       label=label if key == "objective" else None,
                                       labelOpts=_label_opts(number, "#444444"))
                line.setToolTip(f"from iteration {iteration}: {name}")
                plot.addItem(line)
                self.stage_lines.append((plot, line))
                self._restart_at[id(line)] = int(iteration)
        self._stage_count = len(marks)
        self._place_mark_labels()

    def _clear_stage_marks(self) -> None:
        for plot, line in self.stage_lines:
            plot.removeItem(line)
            self._restart_at.pop(id(line), None)
        self.stage_lines, self._stage_count = [], 0

    def _place_mark_labels(self, *_args: object) -> None:
        """Labels of marks in the right part of the view go to the left of their line, so
        no label runs past the plot's edge and is cut."""
        plot = self.plots["objective"]
        (x0, x1), _y = plot.vb.viewRange()
        shown_at: dict[float, float] = {}  # label row (height) -> pixel x of its last label
        labelled = [line for owner, line in (*self.restart_lines, *self.stage_lines)
                    if owner is plot and line.label is not None]
        for line in sorted(labelled, key=lambda ln: ln.value()):
            right = x1 > x0 and (line.value() - x0) / (x1 - x0) > 0.55
            anchor = (1, 0.5) if right else (0, 0.5)
            if line.label.anchors[0] != anchor:
                line.label.anchors = [anchor, anchor]
                line.label.updatePosition()
            # Thinned, never piled up: a label closer than a label's width to the last one
            # shown in its row is hidden (its line's tooltip still names the stage).
            pixel = plot.vb.mapViewToScene(QtCore.QPointF(line.value(), 0.0)).x()
            row = float(line.label.orthoPos)
            free = row not in shown_at or abs(pixel - shown_at[row]) >= MARK_LABEL_GAP
            line.label.setVisible(free and x0 <= line.value() <= x1)
            if free:
                shown_at[row] = pixel

    def _x_of(self, iteration: int) -> float:
        """Where iteration ``iteration`` lies on the current x axis (log10 on a log axis:
        InfiniteLines sit in view coordinates)."""
        if self.x_key == "iteration" or self._store is None or not len(self._store):
            x = float(iteration)
        else:
            arr = self._store.arrays()
            x = float(np.interp(iteration, arr["iteration"], arr["elapsed"]))
        if self.log_x:
            return float(np.log10(x)) if x > 0 else float("nan")
        return x

    def mark_restart(self, iteration: int, what: str) -> None:
        """A vertical dashed line on every plot at a warm restart; the labels (objective
        plot) step down the plot one line per restart, so neighbours never overprint."""
        self.restarts.append((int(iteration), what))
        number = len(self.restarts) - 1 + self._stage_count
        for key, plot in self.plots.items():
            line = pg.InfiniteLine(pos=self._x_of(iteration), angle=90, pen=RESTART_PEN,
                                   movable=False,
                                   label=short_label(what) if key == "objective" else None,
                                   labelOpts=_label_opts(number, "#b35900"))
            line.setToolTip(f"warm restart at iteration {iteration}: {what}")
            plot.addItem(line)
            self.restart_lines.append((plot, line))
            self._restart_at[id(line)] = int(iteration)
        self._place_mark_labels()

    def set_references(self, decoder_psnr: float | None, noise_norm: float | None) -> None:
        """Dashed reference lines: decoder PSNR and the noise norm ‖n‖ (discrepancy level)."""
        for plot, ref in self._refs:
            plot.removeItem(ref)
        self._refs = []
        self._ref_values = (decoder_psnr, noise_norm)
        pen = pg.mkPen("#7f7f7f", width=1, style=QtCore.Qt.PenStyle.DotLine)
        if decoder_psnr is not None and np.isfinite(decoder_psnr):
            ref = pg.InfiniteLine(pos=decoder_psnr, angle=0, pen=pen,
                                  label=f"decoder {decoder_psnr:.1f} dB",
                                  labelOpts={"position": 0.7, "color": "#555",
                                             "anchors": [(0.5, 0), (0.5, 0)]})
            self.plots["psnr"].addItem(ref)
            self._refs.append((self.plots["psnr"], ref))
        if noise_norm is not None and noise_norm > 0:
            level = np.log10(noise_norm) if self._log["discrepancy"] else noise_norm
            ref = pg.InfiniteLine(pos=level, angle=0, pen=pen, label="‖n‖",
                                  labelOpts={"position": 0.1, "color": "#555"})
            self.plots["discrepancy"].addItem(ref)
            self._refs.append((self.plots["discrepancy"], ref))
