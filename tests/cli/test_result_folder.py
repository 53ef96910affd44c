"""A result folder a person can read: with a ground truth, `lbi invert` writes the truth as the
solver saw it (after --resize) and the noisy data beside the reconstruction, and a README.txt
that says what every file is. Checked against the network itself (the original torch module)
and numpy, not against the engine's own arrays."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import nn


def _network(tmp_path: Path) -> tuple[nn.Module, Path]:
    """A convolution whose output is an image (2 channels of 12x12), as a torch.export file."""
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU()).eval()
    with torch.no_grad():  # positive weights: the ReLU passes an image of positive values
        module[0].weight.abs_()
        module[0].bias.fill_(0.05)
    path = tmp_path / "conv.pt2"
    torch.export.save(torch.export.export(module, (torch.zeros(1, 1, 12, 12),)), str(path))
    return module, path


def test_image_run_writes_truth_noisy_data_and_a_readme(tmp_path: Path, cli) -> None:
    module, network = _network(tmp_path)
    yy, xx = np.mgrid[:20, :20]
    picture = np.where((yy - 9) ** 2 + (xx - 11) ** 2 <= 30, 220, 40).astype(np.uint8)
    Image.fromarray(picture).save(tmp_path / "photo.png")
    out = tmp_path / "out"
    code, stdout, err = cli("invert", "--network", network, "--image", tmp_path / "photo.png",
                            "--resize", "--noise-std", "0.02", "--alpha", "1e-2",
                            "--max-iter", "30", "--out", out)
    assert code == 0, err
    assert f"wrote {out}/: README.txt, " in stdout  # the summary names the folder
    names = {p.name for p in out.iterdir()}
    assert {"truth.npy", "truth.png", "noisy_data.npy", "noisy_data.png", "README.txt"} <= names
    metrics = json.loads((out / "result.json").read_text())["metrics"]

    truth = np.load(out / "truth.npy")
    reconstruction = np.load(out / "reconstruction.npy")
    assert truth.shape == reconstruction.shape == (1, 12, 12) and truth.dtype == np.float32
    assert 0.0 <= truth.min() < 0.3 < 0.7 < truth.max() <= 1.0  # the disc survived the resize
    # the truth the solver scored against: its PSNR, recomputed here, is the run's
    mse = float(np.mean((reconstruction.astype(np.float64) - truth) ** 2))
    assert abs(10 * np.log10(1.0 / mse) - metrics["psnr"]) < 1e-3
    shown = np.asarray(Image.open(out / "truth.png"))
    assert shown.shape == (12, 12)
    assert np.abs(shown.astype(int) - np.round(np.clip(truth[0], 0, 1) * 255)).max() <= 1

    noisy = np.load(out / "noisy_data.npy")
    assert noisy.shape == (2, 12, 12) and noisy.dtype == np.float32
    with torch.no_grad():
        clean = module(torch.from_numpy(truth)[None]).numpy()[0]
        fitted = module(torch.from_numpy(reconstruction)[None]).numpy()[0]
    # the data the solver fitted: its noise and the final residual, measured here
    noise_norm = metrics["noise_norm"]
    assert abs(float(np.linalg.norm(noisy - clean)) - noise_norm) < 1e-3 * noise_norm
    residual = float(np.linalg.norm(fitted - noisy))
    assert abs(residual - metrics["discrepancy"]) < 1e-3 * metrics["discrepancy"]
    grid = np.asarray(Image.open(out / "noisy_data.png"))
    assert grid.shape == (12, 24)  # the two channels side by side, scaled min..max
    assert (grid.min(), grid.max()) == (0, 255)

    readme = (out / "README.txt").read_text().splitlines()
    listed = {line.split()[0] for line in readme[2:]}
    assert listed == names and len(readme) == 2 + len(names)
    assert all(len(line.split(None, 1)[1]) > 10 for line in readme[2:])


def test_truth_array_run_round_trips_the_arrays(tmp_path: Path, cli) -> None:
    """--truth X.npy: truth.npy is that array (no resize), noisy_data.npy the noisy output."""
    module, network = _network(tmp_path)
    x = np.zeros((1, 12, 12), np.float32)
    x[0, 3:9, 4:10] = 0.8
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    code, _, err = cli("invert", "--network", network, "--truth", tmp_path / "x.npy",
                       "--noise-std", "0", "--alpha", "1e-2", "--max-iter", "5", "--out", out,
                       "-q")
    assert code == 0, err
    assert np.array_equal(np.load(out / "truth.npy"), x)
    with torch.no_grad():
        clean = module(torch.from_numpy(x)[None]).numpy()[0]
    np.testing.assert_allclose(np.load(out / "noisy_data.npy"), clean, rtol=1e-5, atol=1e-6)
