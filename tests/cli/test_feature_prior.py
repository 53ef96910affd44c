"""`lbi feature-prior` and the layer-wise method on a user's own network."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch


def _user_net(tmp_path: Path) -> tuple[Path, np.ndarray]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.ReLU(),
                                torch.nn.Linear(48, 40), torch.nn.ReLU())
    torch.jit.script(model).save(str(tmp_path / "model.pt"))
    rng = np.random.default_rng(0)
    samples = np.zeros((301, 8, 8), np.float32)  # random bright rectangles
    for img in samples:
        r, c = rng.integers(0, 5, size=2)
        img[r:r + rng.integers(2, 5), c:c + rng.integers(2, 5)] = 1.0
    return tmp_path / "model.pt", samples


def test_layerwise_on_a_user_network_needs_a_prior_and_works_with_one(tmp_path: Path,
                                                                      cli) -> None:
    model, samples = _user_net(tmp_path)
    np.save(tmp_path / "clean.npy", samples[1:])
    np.save(tmp_path / "truth.npy", samples[0])  # not among the prior's samples
    run = ("invert", "--network", model, "--allow-code", "--input-shape", "64", "--truth",
           tmp_path / "truth.npy", "--noise-std", "0.05", "--method", "layerwise",
           "--max-iter", "600", "--quiet")
    code, _, err = cli(*run, "--out", tmp_path / "r0")
    errors = [line for line in err.strip().splitlines() if "error:" in line]
    assert code == 2 and len(errors) == 1 and "feature-prior" in errors[0]  # one error line
    assert not (tmp_path / "r0").exists()  # refused before running

    prior = ("feature-prior", model, "--allow-code", "--input-shape", "64", "--samples",
             tmp_path / "clean.npy")
    code, out, err = cli(*prior, "--rank", "6", "--out", tmp_path / "p")
    assert code == 0, err
    card = json.loads((tmp_path / "p.json").read_text())
    assert card["layers"][0]["samples"] == 300 and card["rank"] == 6
    assert [entry["size"] for entry in card["layers"]] == [48]
    code, _, err = cli(*prior, "--out", tmp_path / "p")
    assert code == 2 and "exists" in err  # nothing overwritten without asking

    code, _, err = cli(*run, "--feature-prior", tmp_path / "p", "--out", tmp_path / "r1")
    assert code == 0, err
    result = json.loads((tmp_path / "r1" / "result.json").read_text())
    code, _, err = cli(*run[:-4], "joint", "--max-iter", "3000", "--quiet", "--out",
                       tmp_path / "r2")
    joint = json.loads((tmp_path / "r2" / "result.json").read_text())
    assert code == 0, err
    # measured 11.9 dB layer-wise, 9.7 dB joint at the defaults
    assert result["metrics"]["psnr"] > max(10.0, joint["metrics"]["psnr"] - 3.0)
