"""A real window on a virtual screen (Xvfb, xcb, 1280×720): network switch → Run → export,
layer-wise at a typed α, two runs compared, Open session over an unsaved run, driven with
mouse and keyboard events (tests/gui/real_window_driver.py). Skipped without xvfb-run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("xvfb-run") is None, reason="xvfb-run is not installed")
def test_network_switch_run_export_in_a_real_window(tmp_path) -> None:
    out = tmp_path / "export"
    out.mkdir()
    env = {**os.environ, "QT_QPA_PLATFORM": "xcb", "PYTHONPATH": str(ROOT),
           "LBI_ENGINE_BACKEND": "process", "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        ["xvfb-run", "-a", "-s", "-screen 0 1280x720x24", sys.executable, "-m",
         "tests.gui.real_window_driver", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-3000:]
    seen = json.loads(lines[-1])
    assert seen["platform"] == "xcb" and seen["truth_at_show"]
    assert seen["first_network"] == "mnist-cnn-ae" and seen["network"] == "mnist-perceptron-ae"
    # the typed budget caps each solve; auto α's continuation path adds its own solves
    assert seen["run_network"] == "mnist-perceptron-ae" and seen["iterations"] >= 1
    assert seen["psnr"] > 10
    # method auto on a one-layer perceptron runs the accelerated one-layer solver
    assert seen["method"] == "one-layer"
    result = out / "lbi_run1_one-layer_result"
    assert {"result.json", "reconstruction.npy", "curves.csv"} <= {p.name for p in
                                                                   result.iterdir()}
    assert json.loads((result / "result.json").read_text())["request"]["max_iter"] == 80
    # layer-wise at a typed α: the field, the table, result.json and what ran all say 0.01
    lw = seen["layerwise"]
    assert lw["method"] == "layerwise" and not lw["auto"] and not lw["stale"]
    assert lw["field"] == pytest.approx(0.01) and lw["cell"] == "0.01" and lw["rule"] == "typed"
    assert lw["metrics_alpha"] == pytest.approx(0.01) and lw["json_alpha"] == pytest.approx(0.01)
    assert lw["json_request_alpha"] == pytest.approx(0.01)
    # two runs compared at 1280×720: every image view stays readable (they were 5 px)
    cmp = seen["compare"]
    assert cmp["window"][1] <= 720
    assert all(min(size) >= 64 for size in cmp["views"].values()), cmp
    assert all(min(size) >= 48 for size in cmp["compared"]), cmp
    assert "0.01" in cmp["text"] and "α auto" not in cmp["text"]
    # Open session over an unsaved run asks; Cancel keeps the runs, Discard opens
    ses = seen["session"]
    assert len(ses["asked"]) == 2 and "not saved" in ses["asked"][0]
    assert ses["cancelled_opened"] is False and ses["runs_after_cancel"] == 2
    assert ses["opened"] is True and ses["runs_after_open"] == 1
    assert ses["compare_after_open"] is None
