"""Start the application for real: bundled CNN autoencoder, a noisy validation digit, Run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lbi_gui.app import build_parser, request_from_args
from lbi_gui.params import DEFAULT_REQUEST
from tests.gui.conftest import wait_idle


def test_gui_defaults_mirror_the_engine_request() -> None:
    """params.DEFAULT_REQUEST is the engine request's fields (built torch-free), threads=1."""
    from lbi_engine.api import InversionRequest

    engine = InversionRequest().to_dict()
    engine.pop("format_version")
    engine.pop("kind")
    gui = dict(DEFAULT_REQUEST)
    assert gui.pop("threads") == 1 and engine.pop("threads") is None  # GUI: one solver thread
    assert gui == engine


def test_command_line_preconfigures_the_window(qtbot, make_window, tmp_path) -> None:
    args = build_parser().parse_args(
        ["--network", "mnist-cnn-ae", "--sample", "7", "--split", "val", "--noise-std", "0.1",
         "--seed", "3", "--alpha", "0.02", "--regulariser", "tv-aniso", "--method", "layerwise",
         "--steps", "paper", "--max-iter", "77", "--tol", "1e-4", "--device", "cpu",
         "--dtype", "float64", "--time-budget", "60", "--layer-alphas", "0.01,0.02"])
    req = request_from_args(args)
    win = make_window(req)
    shown = win.params.current_request()
    for key, value in {"index": 7, "noise_std": 0.1, "seed": 3, "alpha": 0.02,
                       "regulariser": "tv-aniso", "method": "layerwise", "steps": "paper",
                       "max_iter": 77, "tol": 1e-4, "dtype": "float64"}.items():
        assert shown[key] == pytest.approx(value) if isinstance(value, float) else \
            shown[key] == value, key
    assert shown["time_budget"] == 60.0
    assert shown["layer_alphas"] == pytest.approx([0.01, 0.02])  # one per x_1 .. x_{L-1}
    assert win.reg_panel.per_layer.isChecked()
    assert win.view.info.request["index"] == 7


def test_run_joint_on_noisy_digit_beats_the_decoder(qtbot, make_window) -> None:
    # high noise is where the lifted inversion pays (the decoder wins at low noise: at
    # noise 0.05 and α = 9e-3 it is about 23 dB against 19 dB on this digit)
    win = make_window({"max_iter": 300, "noise_std": 0.33, "alpha": 0.1, "index": 7})
    assert win.view.info.network_name == "mnist-cnn-ae"
    assert win.network_panel.table.rowCount() == len(win.view.info.layers) == 3
    assert win.view.info.decoder is not None and win.view.info.truth.shape == (28, 28)
    assert win.view.info.delta > 0
    win.runner.run()
    wait_idle(qtbot, win, timeout=120000)
    run = win.run_table.runs[-1]
    assert run.request["method"] == "auto"  # the default: joint for this 3-layer network
    assert run.metrics.psnr > win.view.info.decoder_psnr + 0.5, (run.metrics, win.view.info)
    # the curves hold exactly the points the solver reports: repeat the run with the engine
    from lbi_engine import api

    torch.set_num_threads(1)
    req = api.InversionRequest.from_dict({"format_version": 1, **win.params.current_request()})
    records = list(api.iterate(api.prepare(req)))
    assert records[-1].method == "joint"
    arr = run.curves.arrays()
    np.testing.assert_array_equal(arr["iteration"], [r.iteration for r in records])
    for key in ("objective", "psnr", "discrepancy", "reg_term"):
        np.testing.assert_allclose(arr[key], [float(getattr(r, key)[0]) for r in records],
                                   rtol=1e-4, err_msg=key)
    np.testing.assert_allclose(arr["bregman"], np.stack([r.bregman_terms[0].numpy()
                                                         for r in records]), rtol=1e-4)
    np.testing.assert_allclose(run.x_raw, records[-1].x[0].numpy(), rtol=1e-4, atol=1e-5)
    # what is on screen is the result
    np.testing.assert_array_equal(win.image_grid.iterate, run.x_display)
    assert win.status.reason.text().startswith("stopped:")


def test_a_zoo_network_on_the_command_line_brings_its_own_data() -> None:
    """`lbi-gui --network natural-cnn-ae` shows colour patches, not the default MNIST digits
    (which it cannot invert: 1 channel for a 3-channel network); --dataset still wins."""
    req = request_from_args(build_parser().parse_args(["--network", "natural-cnn-ae"]))
    assert (req["dataset"], req["split"]) == ("natural", "val")
    req = request_from_args(build_parser().parse_args(["--network", "mnist-cnn-ae"]))
    assert req["dataset"] == "mnist"
    req = request_from_args(build_parser().parse_args(
        ["--network", "natural-cnn-ae", "--dataset", "mnist"]))
    assert req["dataset"] == "mnist"
