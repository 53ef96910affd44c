"""`lbi sweep` at the defaults (alpha "auto", regulariser "auto") solves a cell as one batch
whose samples leave it when they stop: each row must equal `lbi invert` of that sample alone
(the learned prior's noise-scaled weight, the same stop and iteration count)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

SAMPLES = (0, 300, 999)


def test_auto_rows_equal_single_invert_runs(tmp_path: Path, cli) -> None:
    out = tmp_path / "s"
    code, _, err = cli("sweep", "--network", "mnist-cnn-ae", "--alphas", "auto",
                       "--regulariser", "auto", "--noise-stds", "0.1", "--samples",
                       ",".join(map(str, SAMPLES)), "--threads", "1", "--out", out)
    assert code == 0, err
    with open(out / "results.csv", newline="") as fh:
        rows = {int(r["index"]): r for r in csv.DictReader(fh)}
    assert len({r["iterations"] for r in rows.values()}) > 1  # stopped one by one
    for index in SAMPLES:
        row, one = rows[index], tmp_path / f"one{index}"
        code, _, err = cli("invert", "--network", "mnist-cnn-ae", "--split", "val",
                           "--sample", str(index), "--seed", str(index), "--noise-std", "0.1",
                           "--threads", "1", "--out", one, "--quiet")
        assert code == 0, err
        single = json.loads((one / "result.json").read_text())["metrics"]
        assert single["alpha_rule"] == row["alpha_rule"] == "noise-scaled"
        assert float(row["alpha_chosen"]) == single["alpha"]
        assert int(row["iterations"]) == single["iterations"], index
        assert row["stop_reason"] == single["stop_reason"] == "tolerance"
        for key in ("psnr", "ssim", "objective", "delta_squared", "decoder_psnr"):
            assert float(row[key]) == pytest.approx(single[key], rel=1e-4), (index, key)
