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


def test_sweep_defaults_are_inverts_and_its_auto_rows_repeat_with_invert(tmp_path: Path,
                                                                          cli) -> None:
    """One set of defaults: `lbi sweep --alphas auto` and `lbi invert` on the same sample,
    noise and seed (SEED + INDEX) are the same run, so they reach the same PSNR."""
    from lbi_engine.cli import build_parser
    from lbi_engine.settings.defaults import REQUEST_DEFAULTS as D

    args = build_parser().parse_args(["sweep", "--network", "mnist-cnn-ae", "--out", "x"])
    assert (args.regulariser, args.methods, args.alphas, args.steps, args.device) == (
        D["regulariser"], [D["method"]], [D["alpha"]], D["steps"], D["device"])
    assert (args.noise_stds, args.seed, args.dtype, args.max_iter, args.tol, args.tol_mode) == (
        [D["noise_std"]], D["seed"], D["dtype"], D["max_iter"], D["tol"], D["tol_mode"])
    out = tmp_path / "s"
    code, stdout, err = cli("sweep", "--network", "mnist-cnn-ae", "--alphas", "auto",
                            "--samples", "0-1", "--out", out)
    assert code == 0, err
    rows = {r["index"]: r for r in _rows(out)}
    mean_psnr = (float(rows["0"]["psnr"]) + float(rows["1"]["psnr"])) / 2
    assert (f"  best at noise std 0.05: auto, alpha auto (mean chosen "
            f"{float(rows['0']['alpha_chosen']):.4g}): mean PSNR {mean_psnr:.2f} dB") in stdout
    for index in ("0", "1"):
        code, _, err = cli("invert", "--network", "mnist-cnn-ae", "--sample", index,
                           "--seed", index, "--out", tmp_path / index, "-q")
        assert code == 0, err
        single = json.loads((tmp_path / index / "result.json").read_text())["metrics"]
        # the sweep solves its samples as one float32 batch (summed in another order than a
        # single run), so the same iterations agree to float32 rounding, not bit for bit
        assert float(rows[index]["psnr"]) == pytest.approx(single["psnr"], abs=1e-4)
        assert float(rows[index]["alpha_chosen"]) == pytest.approx(single["alpha"], rel=1e-9)
        assert int(rows[index]["iterations"]) == single["iterations"]


def test_summary_best_is_the_best_of_all_cells_auto_included(tmp_path: Path) -> None:
    from lbi_engine.experiments.sweep_summary import write_summary

    spec = SweepSpec(network=NET, alphas=(1e-3, 1e-2, "auto"), noise_stds=(0.05, 0.1),
                     methods=("joint", "pdhg"), indices=(0, 1))
    psnr = {("joint", 0.05, "0.001"): 20.0, ("joint", 0.05, "0.01"): 22.0,
            ("joint", 0.05, "auto"): 25.0, ("pdhg", 0.05, "0.001"): 21.0,
            ("pdhg", 0.05, "0.01"): 23.0, ("pdhg", 0.05, "auto"): 19.0,
            ("joint", 0.1, "0.001"): 15.0, ("joint", 0.1, "0.01"): 18.0,
            ("joint", 0.1, "auto"): 17.0, ("pdhg", 0.1, "0.001"): 16.0,
            ("pdhg", 0.1, "0.01"): 18.5, ("pdhg", 0.1, "auto"): 16.5}
    rows = [{"method": m, "noise_std": str(s), "alpha": a, "psnr": str(p + 0.5 * i),
             "ssim": "0.9", "decoder_psnr": "", "delta_squared": "1.0", "iterations": "100",
             "alpha_chosen": "0.003" if a == "auto" else ""}
            for (m, s, a), p in psnr.items() for i in (0, 1)]  # means: p + 0.25
    files = write_summary(spec, rows, tmp_path)
    assert {f.name for f in files} == {"psnr_vs_alpha.png", "psnr_vs_noise.png", "summary.md"}
    text = (tmp_path / "summary.md").read_text()
    best = text.split("## Best cell per noise std")[1].split("##")[0]
    assert "| 0.05 | joint | auto (mean chosen 0.003) | 25.25 |" in best
    assert "| 0.1 | pdhg | 0.01 | 18.75 |" in best
    per_method = text.split("## Best α per method and noise std")[1].split("##")[0]
    assert "| joint | 0.05 | auto (mean chosen 0.003) | 25.25 |" in per_method
    assert "| pdhg | 0.05 | 0.01 | 23.25 |" in per_method
    assert "| joint | 0.1 | 0.01 | 18.25 |" in per_method
