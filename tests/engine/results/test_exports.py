"""exports.py: the files every run writes (checked by reading them back independently)."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
from PIL import Image

from lbi_engine.io import OutputExistsError
from lbi_engine.results import exports


def test_json_safe_turns_non_finite_into_null_and_numpy_into_plain() -> None:
    data = {"a": float("nan"), "b": [np.float32(1.5), float("inf")], "c": np.int64(3),
            "d": np.array([1.0, -np.inf])}
    safe = exports.json_safe(data)
    assert safe == {"a": None, "b": [1.5, None], "c": 3, "d": [1.0, None]}
    json.dumps(safe, allow_nan=False)  # strict JSON


def test_write_json_refuses_to_overwrite_and_leaves_no_temp_files(tmp_path) -> None:
    path = tmp_path / "r.json"
    exports.write_json(path, {"x": 1.0})
    with pytest.raises(OutputExistsError, match="overwrite"):
        exports.write_json(path, {"x": 2.0})
    assert json.loads(path.read_text())["x"] == 1.0
    exports.write_json(path, {"x": 2.0}, overwrite=True)
    assert json.loads(path.read_text())["x"] == 2.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_save_png_maps_display_range_to_bytes(tmp_path) -> None:
    image = np.array([[0.0, 0.5, 1.0], [-1.0, 2.0, np.nan]], dtype=np.float32)
    exports.save_png(tmp_path / "a.png", image[None])  # (1, H, W) is shown as (H, W)
    pixels = np.asarray(Image.open(tmp_path / "a.png"))
    assert pixels.shape == (2, 3) and pixels.dtype == np.uint8
    assert pixels.tolist() == [[0, 128, 255], [0, 255, 0]]
    exports.save_png(tmp_path / "b.png", image, vmin=None, vmax=None, scale=2)
    big = np.asarray(Image.open(tmp_path / "b.png"))
    assert big.shape == (4, 6) and big[0, 0] == 85 and big[2, 0] == 0 and big[3, 3] == 255


def test_save_npy_is_float32_and_exact(tmp_path) -> None:
    values = np.linspace(0, 1, 12, dtype=np.float64).reshape(3, 4)
    exports.save_npy(tmp_path / "x.npy", values)
    back = np.load(tmp_path / "x.npy", allow_pickle=False)
    assert back.dtype == np.float32 and back.shape == (3, 4)
    np.testing.assert_array_equal(back, values.astype(np.float32))


def test_curves_csv_rows_and_undefined_cells(tmp_path) -> None:
    records = [
        {"iteration": k, "elapsed": 0.1 * k, "objective": np.array([10.0 / (k + 1), 7.0]),
         "bregman_terms": np.array([[1.0 * k, 2.0], [0.0, 0.0]]), "reg_term": np.array([0.5, 0]),
         "psnr": None, "ssim": None, "discrepancy": np.array([0.25, 1.0]),
         "primal_residual": np.array([math.inf, 1.0]), "dual_residual": np.array([1e-3, 1.0]),
         "stage": "layer 1/2" if k else ""}
        for k in range(3)
    ]
    exports.write_curves_csv(records, tmp_path / "c.csv")
    with open(tmp_path / "c.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["iteration", "elapsed", "objective", "bregman_1", "bregman_2", "reg",
                             "psnr", "ssim", "discrepancy", "primal_residual", "dual_residual",
                             "stage"]
    assert [int(r["iteration"]) for r in rows] == [0, 1, 2]
    assert float(rows[2]["objective"]) == pytest.approx(10.0 / 3, rel=1e-15)  # round trip
    assert rows[1]["bregman_1"] == "1.0" and rows[1]["bregman_2"] == "2.0"
    assert rows[0]["psnr"] == "" and rows[0]["primal_residual"] == ""  # inf: not measured
    assert rows[2]["stage"] == "layer 1/2"
    exports.write_curves_csv(records, tmp_path / "c1.csv", sample=1)
    with open(tmp_path / "c1.csv", newline="") as fh:
        second = list(csv.DictReader(fh))
    assert float(second[0]["objective"]) == 7.0 and float(second[0]["bregman_1"]) == 0.0


def test_curves_keep_one_row_when_the_final_record_repeats_an_iterate() -> None:
    def rec(k: int, objective: float, stage: str = "") -> dict:
        return {"iteration": k, "elapsed": 0.0, "objective": np.array([objective]),
                "bregman_terms": np.array([[objective]]), "stage": stage}

    _, rows = exports.curve_rows([rec(0, 3.0), rec(5, 2.0), rec(5, 1.5)])
    assert [(r[0], r[2]) for r in rows] == [(0, 3.0), (5, 1.5)]  # the final one wins
    _, staged = exports.curve_rows([rec(5, 2.0, "layer 1/2"), rec(5, 1.0, "layer 2/2")])
    assert len(staged) == 2  # same count, different stage: two iterates


def test_curves_csv_has_no_column_of_inf_for_a_method_without_a_dual(tmp_path) -> None:
    """The joint method's accelerated step has no dual variable: its dual residual was
    written as a column of "inf"; undefined values are empty cells."""
    from lbi_engine import api
    from lbi_engine.request import InversionRequest

    request = InversionRequest(network="mnist-cnn-ae", dataset="mnist", split="val", index=0,
                               noise_std=0.05, seed=0, alpha=0.02, method="joint", max_iter=30)
    _prepared, _last, records = api.run_to_end(request)
    exports.write_curves_csv(records, tmp_path / "c.csv")
    with open(tmp_path / "c.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for column in ("primal_residual", "dual_residual"):
        cells = [r[column] for r in rows]
        assert "inf" not in cells and "nan" not in cells
        assert all(c == "" or math.isfinite(float(c)) for c in cells)
    assert all(r["dual_residual"] == "" for r in rows)
    assert any(r["primal_residual"] not in ("", "0.0") for r in rows)  # measured ones stay
