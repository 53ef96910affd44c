"""`lbi sweep`: CSV rows, resumability (interrupted and repeated), batched == single runs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from PIL import Image

from lbi_engine.experiments.sweep import COLUMNS, SweepSpec, run_sweep

NET = "mnist-perceptron-ae"
GRID = ["sweep", "--network", NET, "--noise-stds", "0.05", "--methods", "pdhg",
        "--samples", "0-1", "--max-iter", "5", "--threads", "1"]


def _rows(folder: Path) -> list[dict[str, str]]:
    with open(folder / "results.csv", newline="") as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames) == COLUMNS
        return list(reader)


def test_sweep_runs_once_then_skips_every_cell(tmp_path: Path, cli) -> None:
    out = tmp_path / "s"
    code, stdout, err = cli(*GRID, "--alphas", "1e-3,1e-2", "--out", out)
    assert code == 0, err
    assert "ran 2, skipped 0" in stdout
    rows = _rows(out)
    assert len(rows) == 4
    assert {(r["alpha"], r["index"], r["seed"]) for r in rows} == {
        ("0.001", "0", "0"), ("0.001", "1", "1"), ("0.01", "0", "0"), ("0.01", "1", "1")}
    assert all(r["iterations"] == "5" and float(r["psnr"]) > 0 for r in rows)
    for name in ("psnr_vs_alpha.png", "psnr_vs_noise.png"):
        assert Image.open(out / name).size[0] > 100
    assert "best α" in (out / "summary.md").read_text()
    before = (out / "results.csv").read_bytes()
    code, stdout, _ = cli(*GRID, "--alphas", "1e-3,1e-2", "--out", out)
    assert code == 0 and "ran 0, skipped 2" in stdout
    assert (out / "results.csv").read_bytes() == before
    code, stdout, _ = cli(*GRID, "--alphas", "1e-3,1e-2,1e-1", "--out", out)
    assert code == 0 and "ran 1, skipped 2" in stdout
    assert len(_rows(out)) == 6
    assert (out / "results.csv").read_bytes().startswith(before)  # old rows kept as they were


def test_batched_rows_equal_single_invert_runs(tmp_path: Path, cli) -> None:
    out = tmp_path / "s"
    assert cli(*GRID, "--alphas", "1e-2", "--out", out)[0] == 0
    row = next(r for r in _rows(out) if r["index"] == "1")
    code, _, err = cli("invert", "--network", NET, "--split", "val", "--sample", "1",
                       "--seed", "1", "--noise-std", "0.05", "--alpha", "1e-2", "--method",
                       "pdhg", "--max-iter", "5", "--threads", "1", "--out", tmp_path / "one",
                       "--quiet")
    assert code == 0, err
    single = json.loads((tmp_path / "one" / "result.json").read_text())["metrics"]
    for key in ("psnr", "objective", "delta_squared", "decoder_psnr", "l2_norm"):
        assert float(row[key]) == pytest.approx(single[key], rel=1e-5), key
    assert row["network_sha256"] == json.loads(
        (tmp_path / "one" / "result.json").read_text())["network"]["sha256"]


def test_interrupted_sweep_keeps_finished_cells(tmp_path: Path) -> None:
    spec = SweepSpec(network=NET, alphas=(1e-3, 1e-2, 1e-1), noise_stds=(0.0,),
                     methods=("pdhg",), indices=(0,), max_iter=3)
    calls = []

    def stop_after_first_cell(done: int, total: int, text: str) -> None:
        calls.append(done)
        if done == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, tmp_path, stop_after_first_cell)
    assert len(_rows(tmp_path)) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left
    result = run_sweep(spec, tmp_path)
    assert (result.ran, result.skipped) == (2, 1)
    assert [r["alpha"] for r in _rows(tmp_path)] == ["0.001", "0.01", "0.1"]


def test_sweep_bad_input_exits_2(tmp_path: Path, cli) -> None:
    code, _, err = cli(*GRID, "--alphas", "1e-3", "--methods", "pdhg,nope", "--out", tmp_path)
    assert code == 2 and "nope" in err and err.count("\n") == 1
    code, _, err = cli(*GRID, "--alphas", "0", "--out", tmp_path)
    assert code == 2 and "alpha" in err and err.count("\n") == 1
    assert not (tmp_path / "results.csv").exists()
