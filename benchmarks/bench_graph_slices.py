"""Graph networks (residual additions, concatenation) end to end: torchvision slices with
random weights, exported with ``torch.onnx.export``, inverted by ``lbi invert`` at its
defaults from a 64x64 colour crop (``--truth`` .npy, (3, 64, 64) in [0, 1]), against the
hand-written ``torch.optim.LBFGS`` on 1/2 ||N(x) - y||^2 + alpha TV_eps(x) on an alpha grid
(``_hand_written.lbfgs_curve``, started at x = 1/2: from 0 it does not move, since a bias-free
convolution followed by ReLU has gradient 0 there; its best alpha, PSNR and time).

    python -m benchmarks.bench_graph_slices [--arch resnet,mobilenet,squeezenet]
        [--noise-std 0.05] [--time-budget S] [--alphas 1e-3,1e-2,3e-2]

Prints one line per architecture and method (PSNR, seconds, iterations, alpha). Nothing is
written to RESULTS.md by this script; the numbers depend on the machine's load.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn


def _slices() -> dict[str, nn.Module]:
    import torchvision

    torch.manual_seed(0)
    r = torchvision.models.resnet18(weights=None)
    m = torchvision.models.mobilenet_v2(weights=None)
    s = torchvision.models.squeezenet1_1(weights=None)
    return {"resnet": nn.Sequential(r.conv1, r.bn1, r.relu, r.layer1),  # stem without maxpool
            "mobilenet": m.features[:4],
            "squeezenet": nn.Sequential(s.features[0], s.features[1], s.features[3],
                                        s.features[4])}


def _crop() -> np.ndarray:
    """A 64x64 colour crop of scikit-image's astronaut (shipped with the package)."""
    from skimage import data, transform

    img = transform.resize(data.astronaut()[:256, 128:384] / 255.0, (64, 64),
                           anti_aliasing=True)
    return np.ascontiguousarray(img.transpose(2, 0, 1)).astype(np.float32)


def run_lbi(path: Path, truth: Path, out: Path, std: float, budget: float | None) -> dict:
    from lbi_engine.cli import main

    args = ["invert", "--network", str(path), "--truth", str(truth), "--noise-std", str(std),
            "--out", str(out), "--overwrite", "-q"]
    if budget:
        args += ["--time-budget", str(budget)]
    t0 = time.perf_counter()
    if main(args) != 0:
        raise RuntimeError(f"lbi invert failed on {path}")
    metrics = json.loads((out / "result.json").read_text())["metrics"]
    return {"psnr": metrics["psnr"], "seconds": time.perf_counter() - t0,
            "iterations": metrics["iterations"], "alpha": metrics["alpha"]}


def run_lbfgs(path: Path, truth: np.ndarray, std: float, alphas: list[float]) -> dict:
    from benchmarks._hand_written import lbfgs_curve
    from lbi_engine.models.network import LiftedNetwork

    net = LiftedNetwork.from_onnx(path)
    x = torch.from_numpy(truth)[None]
    with torch.no_grad():
        y = net(x)
        noise = torch.randn(y.shape, generator=torch.Generator().manual_seed(0))
        y = net.layers[-1].activation.project(y + std * noise)
    class Shifted:  # L-BFGS from x = 1/2: at x = 0 a bias-free conv + ReLU has gradient 0
        def forward(self, v: torch.Tensor) -> torch.Tensor:
            return net.forward(v + 0.5)

    best: dict = {"psnr": -np.inf}
    for alpha in alphas:  # TV and PSNR do not see the shift
        curve = lbfgs_curve(Shifted(), y, x - 0.5, alpha)
        if curve[-1][1] > best["psnr"]:
            best = {"psnr": curve[-1][1], "seconds": curve[-1][0], "iterations": len(curve),
                    "alpha": alpha}
    return best


def run(arch: list[str] | None = None, std: float = 0.05, budget: float | None = None,
        alphas: tuple[float, ...] = (1e-3, 1e-2, 3e-2)) -> list[str]:
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        truth = _crop()
        np.save(folder / "truth.npy", truth)
        for name, module in _slices().items():
            if arch and name not in arch:
                continue
            path = folder / f"{name}.onnx"
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                torch.onnx.export(module.eval(), (torch.rand(1, 3, 64, 64),), str(path))
            for method, result in (
                    ("lbi", run_lbi(path, folder / "truth.npy", folder / name, std, budget)),
                    ("L-BFGS", run_lbfgs(path, truth, std, list(alphas)))):
                line = (f"{name:10s} {method:7s} PSNR {result['psnr']:6.2f} dB  "
                        f"{result['seconds']:7.1f} s  {result['iterations']:5d} iterations  "
                        f"alpha {result['alpha']:.3g}")
                print(line, flush=True)
                lines.append(line)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="")
    parser.add_argument("--noise-std", type=float, default=0.05)
    parser.add_argument("--time-budget", type=float, default=None)
    parser.add_argument("--alphas", default="1e-3,1e-2,3e-2")
    a = parser.parse_args()
    run([s for s in a.arch.split(",") if s] or None, a.noise_std, a.time_budget,
        tuple(float(v) for v in a.alphas.split(",")))


if __name__ == "__main__":
    main()
