"""`lbi prior` and `lbi invert --regulariser gaussian+box` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest


def test_lbi_prior_then_invert_with_it(tmp_path: Path, cli) -> None:
    from lbi_engine.data import load_mnist

    images, _ = load_mnist("train")
    np.save(tmp_path / "clean.npy", images[:300].numpy().astype(np.float32))
    code, out, err = cli("prior", "mnist-cnn-ae", "--samples", tmp_path / "clean.npy",
                         "--rank", "20", "--out", tmp_path / "p")
    assert code == 0, err
    card = json.loads((tmp_path / "p.json").read_text())
    assert card["kind"] == "lbi-input-prior" and card["rank"] == 20 and card["samples"] == 300
    assert card["command"].startswith("lbi prior mnist-cnn-ae --samples")
    code, out, err = cli("invert", "--network", "mnist-cnn-ae", "--sample", "7", "--split", "val",
                         "--noise-std", "0.1", "--regulariser", "gaussian+box", "--input-prior",
                         tmp_path / "p", "--max-iter", "60", "--quiet", "--out", tmp_path / "r")
    assert code == 0, err
    result = json.loads((tmp_path / "r" / "result.json").read_text())
    assert result["request"]["regulariser"] == "gaussian+box"
    assert result["metrics"]["alpha"] == pytest.approx(0.1**2 / 8)
    assert result["metrics"]["alpha_rule"].startswith("noise-scaled")
    recon = np.load(tmp_path / "r" / "reconstruction.npy")
    assert recon.min() >= 0.0 and recon.max() <= 1.0


def test_gaussian_without_a_prior_is_one_clear_error(tmp_path: Path, cli) -> None:
    code, _, err = cli("invert", "--network", "circle-perceptron", "--dataset", "cartoon",
                       "--split", "disc", "--sample", "0", "--regulariser", "gaussian",
                       "--alpha", "0.01", "--max-iter", "5", "--quiet", "--out", tmp_path / "r")
    assert code == 2 and "ships none" in err and "lbi prior" in err
    assert not (tmp_path / "r").exists()


def test_regulariser_auto_says_what_ran_and_why(tmp_path: Path, cli) -> None:
    for network, want in (("mnist-cnn-ae", "gaussian + box [0, 1]"),
                          ("mnist-perceptron-ae", "tv")):
        out = tmp_path / network
        code, stdout, err = cli("invert", "--network", network, "--sample", "3", "--split",
                                "val", "--noise-std", "0.1", "--regulariser", "auto",
                                "--max-iter", "30", "--quiet", "--out", out)
        assert code == 0, err
        metrics = json.loads((out / "result.json").read_text())["metrics"]
        assert metrics["regulariser_run"].startswith(want)
        assert metrics["regulariser_rule"].startswith("auto:")


def test_regulariser_auto_takes_tv_without_a_noise_level(tmp_path: Path, cli) -> None:
    code, _, err = cli("invert", "--network", "mnist-cnn-ae", "--sample", "3", "--split", "val",
                       "--noise-std", "0", "--max-iter", "20", "--alpha", "0.01", "--quiet",
                       "--out", tmp_path / "r")
    assert code == 0, err
    metrics = json.loads((tmp_path / "r" / "result.json").read_text())["metrics"]
    assert metrics["regulariser_run"] == "tv" and "noise level" in metrics["regulariser_rule"]
