"""One results writer: the same request run by ``lbi invert`` and by
the window, exported from the window, gives the same files: the same curves.csv columns and
values, the same reconstruction.npy (the perceptron's centring undone: the GUI's NPY was
offset by its 0.131 mean), the same result.json parameters and metrics."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lbi_gui.export import planned_paths
from tests.gui.conftest import wait_idle

REQUEST = {"network": "mnist-perceptron-ae", "index": 7, "noise_std": 0.1, "seed": 2,
           "alpha": 0.01, "method": "joint", "max_iter": 40, "report_every": 5, "tol": 0.0,
           "threads": 1}
CLI = ["--network", "mnist-perceptron-ae", "--sample", "7", "--noise-std", "0.1", "--seed", "2",
       "--alpha", "0.01", "--method", "joint", "--max-iter", "40", "--report-every", "5",
       "--tol", "0", "--threads", "1", "-q"]


def _csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open() as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames or []), list(reader)


def test_gui_export_writes_the_cli_files(qtbot, make_window, tmp_path) -> None:
    cli_out = tmp_path / "cli"
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-m", "lbi_engine.cli", "invert", *CLI, "--out",
                    str(cli_out)], check=True, cwd=root, timeout=300,
                   env={**__import__("os").environ, "PYTHONPATH": str(root)})
    win = make_window(dict(REQUEST))
    win.runner.run()
    wait_idle(qtbot, win, timeout=120000)
    run = win.run_table.runs[-1]
    paths = planned_paths(tmp_path / "gui", "digit", ["result", "npy", "csv"])
    (tmp_path / "gui").mkdir()
    win.exports.export_result(run, paths)
    gui_out = paths["result"]
    # the window keeps no y^delta of its runs: noisy_data.* are the command line's alone
    assert sorted(p.name for p in gui_out.iterdir()) == sorted(
        p.name for p in cli_out.iterdir() if not p.name.startswith("noisy_data."))
    cli_cols, cli_rows = _csv(cli_out / "curves.csv")
    for csv_path in (gui_out / "curves.csv", paths["csv"]):
        cols, rows = _csv(csv_path)
        assert cols == cli_cols
        assert [r["iteration"] for r in rows] == [r["iteration"] for r in cli_rows]
        for key in ("objective", "bregman_1", "reg", "psnr", "discrepancy"):
            np.testing.assert_allclose([float(r[key]) for r in rows],
                                       [float(r[key]) for r in cli_rows], rtol=1e-6, err_msg=key)
    cli_x = np.load(cli_out / "reconstruction.npy")
    for npy in (gui_out / "reconstruction.npy", paths["npy"]):
        x = np.load(npy)
        assert x.shape == cli_x.shape and x.dtype == cli_x.dtype
        np.testing.assert_allclose(x, cli_x, atol=1e-6)
    np.testing.assert_array_equal(np.load(gui_out / "decoder.npy"),
                                  np.load(cli_out / "decoder.npy"))
    cli_doc = json.loads((cli_out / "result.json").read_text())
    gui_doc = json.loads((gui_out / "result.json").read_text())
    assert set(gui_doc) == set(cli_doc)
    assert gui_doc["request"] == cli_doc["request"]
    assert gui_doc["network"] == cli_doc["network"] and gui_doc["versions"] == cli_doc["versions"]
    timing = {"seconds"}
    assert set(gui_doc["metrics"]) == set(cli_doc["metrics"])
    for key, value in cli_doc["metrics"].items():
        if key in timing or not isinstance(value, float):
            assert key in timing or gui_doc["metrics"][key] == value, key
        else:
            assert gui_doc["metrics"][key] == pytest.approx(value, rel=1e-6), key


def test_svg_export_is_vector_with_whole_greek_labels(qtbot, fake_engine, make_window,
                                                      tmp_path) -> None:
    import xml.etree.ElementTree as ET

    fake_engine()
    win = make_window({"network": "fake-net", "max_iter": 50})
    win.runner.run()
    wait_idle(qtbot, win)
    paths = planned_paths(tmp_path, "d", ["plots_svg"])
    win.exports.export_result(win.run_table.runs[-1], paths)
    root = ET.parse(paths["plots_svg"]).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    assert not list(root.iter(f"{ns}image"))  # no embedded bitmaps (cached axes were)
    texts = ["".join(t.itertext()).strip() for t in root.iter(f"{ns}text")]
    assert "Bregman terms and αR" in texts and "αR" in texts and "B₁" in texts
    assert "Discrepancy ‖σ(f(x)) − y^δ‖" in texts
    assert any(t.replace(".", "").isdigit() for t in texts)  # tick labels are text too
