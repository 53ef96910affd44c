"""curves.csv: one row per reported iterate of one sample (iteration, elapsed, objective,
bregman_1..L, reg, psnr, ssim, discrepancy, residuals, stage).

Part of the one results writer (:mod:`lbi_engine.results.exports` re-exports these). Records
may be :class:`~lbi_engine.solvers.base.IterateRecord` objects or their ``to_numpy()`` dicts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from lbi_engine.io import atomic_write_text, safe_output_path
from lbi_engine.results.csv_cells import csv_text
from lbi_engine.results.images import to_numpy as _to_numpy

CURVE_COLUMNS_HEAD = ("iteration", "elapsed", "objective")
CURVE_COLUMNS_TAIL = (
    "reg",
    "psnr",
    "ssim",
    "discrepancy",
    "primal_residual",
    "dual_residual",
    "stage",
)


def _field(record: Any, name: str) -> Any:
    if isinstance(record, dict):
        return record.get(name)
    return getattr(record, name, None)


def _sample_value(value: Any, sample: int) -> float | None:
    value = _to_numpy(value)
    if value is None:
        return None
    array = np.asarray(value, dtype=np.float64)
    number = float(array.reshape(-1)[sample]) if array.ndim else float(array)
    return number


def curve_rows(records: Iterable[Any], sample: int = 0) -> tuple[list[str], list[list[Any]]]:
    """The header and rows of curves.csv: one row per reported iterate of one sample.

    A solver reports the last iterate twice when the end falls on a report (once as a
    regular and once as the final record); only the later (final) one is kept.
    """
    records = list(records)
    records = [
        r for i, r in enumerate(records)
        if i + 1 == len(records)
        or (_field(records[i + 1], "iteration"), _field(records[i + 1], "stage"))
        != (_field(r, "iteration"), _field(r, "stage"))
    ]
    layers = 0
    for record in records:
        terms = _to_numpy(_field(record, "bregman_terms"))
        if terms is not None:
            layers = max(layers, int(np.asarray(terms).shape[-1]))
    header = [
        *CURVE_COLUMNS_HEAD,
        *(f"bregman_{i + 1}" for i in range(layers)),
        *CURVE_COLUMNS_TAIL,
    ]
    rows: list[list[Any]] = []
    for record in records:
        terms = _to_numpy(_field(record, "bregman_terms"))
        bregman: list[float | None] = [None] * layers
        if terms is not None:
            terms = np.asarray(terms, dtype=np.float64)
            per_sample = terms[sample] if terms.ndim == 2 else terms
            bregman = [float(v) for v in per_sample] + [None] * (layers - per_sample.size)
        rows.append(
            [
                int(_field(record, "iteration")),
                float(_field(record, "elapsed") or 0.0),
                _sample_value(_field(record, "objective"), sample),
                *bregman,
                _sample_value(_field(record, "reg_term"), sample),
                _sample_value(_field(record, "psnr"), sample),
                _sample_value(_field(record, "ssim"), sample),
                _sample_value(_field(record, "discrepancy"), sample),
                _residual(_sample_value(_field(record, "primal_residual"), sample)),
                _residual(_sample_value(_field(record, "dual_residual"), sample)),
                _field(record, "stage") or "",
            ]
        )
    return header, rows


def _residual(value: float | None) -> float | None:
    """A residual the solver could not measure is reported as inf (the first record; the
    dual residual of a method without a dual variable, e.g. the accelerated one-layer
    solver): undefined, so an empty cell, not a column of "inf"."""
    return value if value is not None and math.isfinite(value) else None


def write_curves_csv(
    records: Iterable[Any], path: str | Path, sample: int = 0, overwrite: bool = False
) -> Path:
    """curves.csv: iteration, elapsed, objective, bregman_1..L, reg, psnr, ssim,
    discrepancy, primal_residual, dual_residual, stage (empty cell = undefined)."""
    target = safe_output_path(path, overwrite)
    header, rows = curve_rows(records, sample)
    atomic_write_text(target, csv_text(header, rows))
    return target
