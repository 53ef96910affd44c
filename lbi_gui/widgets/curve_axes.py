"""The curves' axes: a log axis that labels decades only, and the y ranges held during a run
(rounded outwards so they rarely change; see ``CurvesPanel.update_curves`` for why)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg


class LogAxis(pg.AxisItem):
    """A log axis that labels decades only (plus 2 and 5 when less than two decades show).

    pyqtgraph labels every minor tick of a log axis, which overprints on small plots.
    """

    def logTickStrings(self, values, scale, spacing):  # pyqtgraph override
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


def _nice_range(series: list[np.ndarray], log: bool) -> tuple[float, float] | None:
    """A range holding every finite value, rounded outwards so it rarely changes.

    Log plots (view coordinates are log10): whole decades. Linear plots: multiples of the
    power of ten below the data's span.
    """
    finite = [y[np.isfinite(y)] for y in series if y.size]
    finite = [y for y in finite if y.size]
    if not finite:
        return None
    lo = min(float(y.min()) for y in finite)
    hi = max(float(y.max()) for y in finite)
    if log:
        lo, hi = float(np.log10(lo)), float(np.log10(hi))
        lo, hi = float(np.floor(lo)), float(np.ceil(hi))
        return (lo, hi) if hi > lo else (lo, lo + 1.0)
    span = hi - lo if hi > lo else max(abs(hi) * 0.1, 1e-3)
    step = 10.0 ** np.floor(np.log10(span))
    lo, hi = float(np.floor(lo / step) * step), float(np.ceil(hi / step) * step)
    return (lo, hi) if hi > lo else (lo, lo + step)


class HeldRanges:
    """The ranges a :class:`~lbi_gui.widgets.curves.CurvesPanel` holds during a run, and
    their release back to auto-range (a mixin over the panel's plots)."""

    plots: dict[str, pg.PlotItem]
    _log: dict[str, bool]
    _x_hi: float | None
    _y_ranges: dict[str, tuple[float, float]]

    def _hold_ranges(self, it: np.ndarray, shown: dict[str, list[np.ndarray]],
                     live_until: float) -> None:
        """An x range [first, end] that grows by half whenever the data reaches its end (so
        it follows the data instead of squashing it into [0, max_iter]); y ranges that only
        change when the data leaves them. ``live_until`` caps the x range at the iteration the
        run stops at."""
        if not it.size:
            return
        last = float(it[-1])
        if self._x_hi is None or last > self._x_hi:
            self._x_hi = float(min(max(1.5 * last, 10.0), max(live_until, last, 1.0)))
            for plot in self.plots.values():
                plot.disableAutoRange()
            self.plots["objective"].setXRange(float(it[0]), self._x_hi, padding=0.02)  # linked
        for key, plot in self.plots.items():
            target = _nice_range(shown[key], log=self._log[key])
            if target is None:
                continue
            current = self._y_ranges.get(key)
            if (current is None or target[0] < current[0] or target[1] > current[1]
                    or (current[1] - current[0]) > 4.0 * (target[1] - target[0])):
                if not self._log[key]:  # headroom: a rising PSNR does not move it each time
                    pad = 0.25 * (target[1] - target[0])
                    target = _nice_range([np.array([target[0] - pad, target[1] + pad])],
                                         log=False) or target
                self._y_ranges[key] = target
                plot.disableAutoRange()
                plot.setYRange(*target, padding=0.02)

    def _release_ranges(self) -> None:
        """Back to pyqtgraph's exact auto-range (after a run, for stored runs)."""
        if self._x_hi is not None or self._y_ranges:
            self._x_hi, self._y_ranges = None, {}
            for plot in self.plots.values():
                plot.enableAutoRange()
