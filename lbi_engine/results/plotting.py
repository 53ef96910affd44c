"""Figures for reports (``lbi reproduce``, ``lbi sweep``) as PNG files, with matplotlib's Agg.

Why the object API (``matplotlib.figure.Figure`` + ``FigureCanvasAgg``) and not pyplot:
pyplot keeps global state and picks a GUI backend; here nothing touches a display or Qt,
figures are freed when they go out of scope, and it is safe in worker threads. matplotlib is
imported inside the functions, so importing this module costs nothing.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lbi_engine.io import atomic_write_bytes, safe_output_path
from lbi_engine.results.exports import to_uint8_image

DPI = 110


@dataclass
class Series:
    """One line of a line plot; ``y`` may contain None/NaN (gaps)."""

    x: Sequence[float]
    y: Sequence[float | None]
    label: str = ""
    style: str = "o-"
    extra: dict[str, Any] = field(default_factory=dict)


def _save(figure: Any, path: str | Path, overwrite: bool) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    target = safe_output_path(path, overwrite)
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    atomic_write_bytes(target, buffer.getvalue())
    return target


def line_plot(
    path: str | Path,
    series: Sequence[Series],
    *,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
    logx: bool = False,
    logy: bool = False,
    overwrite: bool = False,
    size: tuple[float, float] = (6.0, 4.0),
) -> Path:
    """A line plot of several series with a legend, written as PNG."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=size)
    axes = figure.add_subplot(1, 1, 1)
    for s in series:
        y = np.array([np.nan if v is None else float(v) for v in s.y], dtype=np.float64)
        x = np.asarray(s.x, dtype=np.float64)
        if logy:
            y = np.where(y > 0, y, np.nan)  # log axes cannot show 0 or negative values
        axes.plot(x, y, s.style, label=s.label or None, **s.extra)
    from matplotlib.ticker import NullFormatter

    if logx:
        axes.set_xscale("log")
        axes.xaxis.set_minor_formatter(NullFormatter())  # minor labels overlap on short axes
    if logy:
        axes.set_yscale("log")
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, which="both", alpha=0.3)
    if any(s.label for s in series):
        axes.legend(fontsize="small")
    return _save(figure, path, overwrite)


def image_grid(
    path: str | Path,
    rows: Sequence[Sequence[Any]],
    *,
    row_labels: Sequence[str] = (),
    captions: Sequence[Sequence[str]] | None = None,
    title: str = "",
    vmin: float | None = 0.0,
    vmax: float | None = 1.0,
    overwrite: bool = False,
    cell: float = 1.6,
) -> Path:
    """A grid of grey-scale images (one list per row), each with an optional caption.

    Images are display arrays in [vmin, vmax] (None: per-image min/max, for arrays such as
    a Landweber reconstruction that leave [0, 1]).
    """
    from matplotlib.figure import Figure

    n_rows = len(rows)
    n_cols = max(len(r) for r in rows)
    figure = Figure(figsize=(cell * n_cols + (0.9 if row_labels else 0.0), cell * n_rows + 0.5))
    for r, row in enumerate(rows):
        for c in range(n_cols):
            axes = figure.add_subplot(n_rows, n_cols, r * n_cols + c + 1)
            axes.set_xticks([])
            axes.set_yticks([])
            if c >= len(row) or row[c] is None:
                axes.set_axis_off()
                continue
            pixels = to_uint8_image(row[c], vmin, vmax)
            axes.imshow(pixels, cmap="gray", vmin=0, vmax=255, interpolation="nearest")
            if captions is not None and r < len(captions) and c < len(captions[r]):
                axes.set_xlabel(captions[r][c], fontsize="small")
            if c == 0 and r < len(row_labels):
                axes.set_ylabel(row_labels[r], fontsize="small")
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    return _save(figure, path, overwrite)


def log_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of log y against log x (positive entries only); NaN if < 2."""
    pairs = [(math.log(a), math.log(b)) for a, b in zip(x, y, strict=True) if a > 0 and b > 0]
    if len(pairs) < 2:
        return math.nan
    lx, ly = np.array(pairs).T
    return float(np.polyfit(lx, ly, 1)[0])
