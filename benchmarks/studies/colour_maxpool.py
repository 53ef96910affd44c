"""Does a colour picture through a max-pooling CNN invert at lbi's defaults?

A colour picture through a max-pooling CNN, as a new user runs it.

``python -m benchmarks.studies.colour_maxpool [--out DIR] [--pool max|avg] [--formats onnx pt2]``

Builds conv(3->8) -> ReLU -> MaxPool2d(2) -> conv(8->16) -> ReLU (random init, seed 0), exports
it with ``torch.onnx.export`` and ``torch.export.save`` (the default calls), saves a 64x64
colour crop of ``skimage.data.astronaut()`` as PNG, and runs

    lbi invert --network f.onnx --image astronaut64.png --noise-std 0.05

at lbi's defaults in a subprocess (wall time includes start-up, reading and lifting). For
reference it runs hand-written ``torch.optim.LBFGS`` on 1/2 ||N(x) - y||^2 + alpha TV_eps(x)
(benchmarks/_hand_written.py) through the torch module on the same noisy y (lbi's noise:
result.json's seed) over a grid of alpha, and reports its best PSNR and the time to it.
Prints one row per run; nothing is written outside ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

SIDE = 64
ALPHAS = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1)


def make_inputs(out: Path, pool: str) -> dict[str, Path]:
    import torch
    from PIL import Image
    from skimage import data
    from torch import nn

    img = data.astronaut()[40:40 + 2 * SIDE:2, 180:180 + 2 * SIDE:2]  # the face, every 2nd px
    picture = out / "astronaut64.png"
    Image.fromarray(np.ascontiguousarray(img)).save(picture)
    torch.manual_seed(0)
    pooling = nn.MaxPool2d(2) if pool == "max" else nn.AvgPool2d(2)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), pooling,
                        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU()).eval()
    example = torch.rand(1, 3, SIDE, SIDE)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")  # the exporters' own notices
        torch.onnx.export(net, (example,), str(out / "f.onnx"))
    torch.export.save(torch.export.export(net, (example,)), str(out / "f.pt2"))
    torch.save(net.state_dict(), out / "weights.pt")
    return {"picture": picture, "onnx": out / "f.onnx", "pt2": out / "f.pt2"}


def run_lbi(network: Path, picture: Path, out: Path) -> dict:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "lbi_engine.cli", "invert", "--network",
                           str(network), "--image", str(picture), "--noise-std", "0.05",
                           "--out", str(out), "--quiet"], capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    doc = json.loads((out / "result.json").read_text())
    from PIL import Image

    with Image.open(out / "reconstruction.png") as png:
        mode = png.mode
    m = doc["metrics"]
    return {"wall_s": wall, "psnr": m["psnr"], "iterations": m["iterations"],
            "alpha": m["alpha"], "method": m.get("method_run"), "png_mode": mode,
            "layers": doc["network"]["layers"],
            "added": doc["network"].get("lifted_layers_added", 0)}


def run_lbfgs(folder: Path, pool: str, lbi_out: Path) -> dict:
    """L-BFGS through the torch module, on lbi's own noisy data (same seed, same noise)."""
    import torch
    from torch import nn

    from benchmarks._hand_written import lbfgs_curve
    from lbi_engine import api
    from lbi_engine.request import InversionRequest

    request = InversionRequest.from_dict(json.loads((lbi_out / "result.json").read_text())[
        "request"])
    prepared = api.prepare(request)  # the noisy y lbi inverted
    pooling = nn.MaxPool2d(2) if pool == "max" else nn.AvgPool2d(2)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), pooling,
                        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU()).eval()
    net.load_state_dict(torch.load(folder / "weights.pt", weights_only=True))
    net.requires_grad_(False)

    class Module:
        forward = staticmethod(net)

    y = prepared.problem.y_delta.to(torch.float32)
    truth = prepared.problem.x_true.to(torch.float32)
    best = None
    for alpha in ALPHAS:
        curve = lbfgs_curve(Module, y, truth, alpha)
        peak = max(range(len(curve)), key=lambda k: curve[k][1])
        row = {"alpha": alpha, "psnr": curve[peak][1], "seconds": curve[peak][0],
               "iterations": peak + 1}
        if best is None or row["psnr"] > best["psnr"]:
            best = row
    assert best is not None
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.studies.colour_maxpool")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--pool", choices=["max", "avg"], default="max")
    parser.add_argument("--formats", nargs="+", choices=["onnx", "pt2"],
                        default=["onnx", "pt2"])
    parser.add_argument("--no-lbfgs", action="store_true")
    args = parser.parse_args(argv)
    folder = args.out or Path(tempfile.mkdtemp(prefix="lbi-colour-"))
    folder.mkdir(parents=True, exist_ok=True)
    files = make_inputs(folder, args.pool)
    for fmt in args.formats:
        out = folder / f"run-{fmt}"
        row = run_lbi(files[fmt], files["picture"], out)
        print(f"lbi invert {fmt} ({args.pool}-pool): {row}", flush=True)
    if not args.no_lbfgs:
        print(f"L-BFGS best of alpha {ALPHAS}: {run_lbfgs(folder, args.pool, out)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
