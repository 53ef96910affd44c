"""`lbi invert` on a network file whose graph adds tensors (a residual block): the run goes
through the whole request path (noise, warm-up, alpha "auto", the joint method on the graph,
the result files) and reconstructs better than the blank image."""

from __future__ import annotations

import contextlib
import io
import json
import warnings

import numpy as np
import pytest
import torch
from torch import nn


class _Block(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(c, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv2(torch.relu(self.conv1(x))) + x)


def _truth(side: int) -> np.ndarray:
    yy, xx = np.mgrid[:side, :side]
    disc = ((yy - 5.5) ** 2 + (xx - 6.5) ** 2 <= 12).astype(np.float32)
    return (0.2 + 0.6 * disc)[None]


@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_invert_a_residual_network_file(cli, tmp_path, fmt):
    pytest.importorskip("onnx")
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), _Block(4),
                           nn.Conv2d(4, 3, 1)).eval()
    x = torch.zeros(1, 1, 12, 12)
    path = tmp_path / f"res.{fmt}"
    if fmt == "onnx":
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(module, (x,), str(path))
    else:
        torch.export.save(torch.export.export(module, (x,)), str(path))
    truth = tmp_path / "x.npy"
    np.save(truth, _truth(12))
    out = tmp_path / "out"
    code, _, err = cli("invert", "--network", path, "--truth", truth, "--noise-std", "0.01",
                       "--max-iter", "400", "--out", out, "-q")
    assert code == 0, err
    result = json.loads((out / "result.json").read_text())
    metrics = result["metrics"] if "metrics" in result else result
    blank = 10 * np.log10(1.0 / np.mean(_truth(12) ** 2))  # PSNR of the zero image
    assert metrics["psnr"] > blank + 10
    rec = np.load(out / "reconstruction.npy")
    assert rec.shape == (1, 12, 12)
    assert "joint" in json.dumps(result)


def test_convert_refuses_a_graph_in_one_line_and_says_what_to_do(cli, tmp_path):
    module = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), _Block(4)).eval()
    path = tmp_path / "res.pt2"
    torch.export.save(torch.export.export(module, (torch.zeros(1, 1, 8, 8),)), str(path))
    code, _, err = cli("convert", path, "--out", tmp_path / "cards")
    assert code == 2
    assert "adds or concatenates" in err and "lbi invert --network FILE" in err
    assert len(err.strip().splitlines()) == 1
