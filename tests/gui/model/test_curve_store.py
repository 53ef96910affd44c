"""A run's curves (lbi_gui.model.runs.CurveStore): CSV and arrays round trips."""

from __future__ import annotations

import csv
import io

import numpy as np

from lbi_gui.model.runs import CurveStore


def test_curve_store_csv_and_arrays_round_trip() -> None:
    store = CurveStore()
    pts = [{"iteration": k, "objective": 1.0 / (k + 1), "reg_term": 0.1, "discrepancy": 2.0,
            "primal_residual": 1e-3, "dual_residual": None, "psnr": 20 + k, "ssim": 0.5,
            "elapsed": 0.01 * k, "bregman": [0.5, 0.25 * k]} for k in range(0, 30, 10)]
    store.extend(pts)
    store.mark_restart(10, "α 0.01→0.02")
    rows = list(csv.DictReader(io.StringIO(store.to_csv())))
    assert [int(r["iteration"]) for r in rows] == [0, 10, 20]
    assert float(rows[1]["objective"]) == 1.0 / 11
    assert rows[0]["dual_residual"] == ""
    assert float(rows[2]["bregman_2"]) == 5.0
    again = CurveStore.from_arrays(store.to_arrays(), ["α 0.01→0.02"])
    for key, value in store.arrays().items():
        np.testing.assert_array_equal(again.arrays()[key], value)
    assert again.restarts == [(10, "α 0.01→0.02")]
