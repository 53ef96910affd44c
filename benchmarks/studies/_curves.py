"""PSNR against time of several methods over several digits, as the figures and the CSV that
``bench_multilayer --write`` puts into benchmarks/results/.

A run's curve is a list of (seconds, PSNR) after its iterations or records. A method's curve
over the digits is the mean, at each time t of a log grid, of every digit's PSNR at its last
point at or before t (a finished run keeps its final PSNR); it starts once every digit has a
point.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np

Curve = list[tuple[float, float]]
#: points of the log time grid of a figure
GRID = 200


def psnr_at(curve: Curve, t: float) -> float | None:
    """The PSNR of the last point at or before ``t``; None before the first."""
    value = None
    for seconds, psnr in curve:
        if seconds > t:
            break
        value = psnr
    return value


def mean_curve(curves: list[Curve], grid: np.ndarray) -> list[float | None]:
    """The mean over the runs of :func:`psnr_at` at every time of ``grid`` (None until every
    run has a point)."""
    out: list[float | None] = []
    for t in grid:
        values = [psnr_at(c, float(t)) for c in curves]
        out.append(None if any(v is None for v in values)
                   else float(np.mean([v for v in values if v is not None])))
    return out


def write(folder: Path, methods: dict[float, dict[str, list[Curve]]], stem: str
          ) -> list[Path]:
    """For every noise level of ``methods`` ({std: {method: per-digit curves}}) a PNG
    ``{stem}_sigma{std}.png`` (mean PSNR against log time), and one CSV ``{stem}.csv`` of
    every run's points (sigma, method, run, seconds, psnr). Returns the paths written."""
    from lbi_engine.io import atomic_write_bytes
    from lbi_engine.results.plotting import Series, line_plot

    written = []
    rows = io.StringIO()
    table = csv.writer(rows, lineterminator="\n")
    table.writerow(["sigma", "method", "run", "seconds", "psnr_db"])
    for std, by_method in methods.items():
        points = [t for curves in by_method.values() for c in curves for t, _ in c if t > 0]
        if not points:
            continue
        grid = np.geomspace(min(points), max(points), GRID)
        series = [Series(list(grid), mean_curve(curves, grid), label=name, style="-")
                  for name, curves in by_method.items()]
        written.append(line_plot(
            folder / f"{stem}_sigma{std:g}.png", series, logx=True, overwrite=True,
            title=f"mnist-cnn-ae, noise std {std:g}: mean PSNR over the digits",
            xlabel="solver time (s)", ylabel="PSNR (dB)"))
        for name, curves in by_method.items():
            for run, curve in enumerate(curves):
                for seconds, psnr in curve:
                    if math.isfinite(seconds):
                        table.writerow([f"{std:g}", name, run, f"{seconds:.6f}",
                                        f"{psnr:.4f}"])
    target = folder / f"{stem}.csv"
    atomic_write_bytes(target, rows.getvalue().encode("utf-8"))
    written.append(target)
    return written
