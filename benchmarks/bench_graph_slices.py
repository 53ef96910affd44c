"""Vision networks as researchers export them, inverted at lbi's defaults.

Slices of torchvision architectures with random weights (seed 0) — resnet18's stem + layer1
(max-pool and residual blocks), vgg11 and alexnet ``features[:6]`` (max-pooling chains),
mobilenet_v2 ``features[:4]`` (depthwise convolutions, ReLU6, inverted residual) and
squeezenet1_1's stem + two Fire modules (channel concatenation) — exported the two default
ways (``torch.onnx.export`` and ``torch.export.save``), then, in a subprocess as a user runs it,

    lbi invert --network f.onnx --image astronaut64.png --noise-std 0.05

(wall time includes start-up, reading and lifting). The reference is hand-written
``torch.optim.LBFGS`` on 1/2 ||N(x) - y||^2 + alpha TV_eps(x) through the torch module itself
(``_hand_written.lbfgs_curve``), on lbi's own noisy y (rebuilt from result.json's request,
same seed), started at x = 1/2 (at x = 0 a bias-free convolution followed by ReLU has
gradient 0), over a grid of alpha: its best PSNR (the final iterate at the best alpha) and
the time to it.

    python -m benchmarks.bench_graph_slices [--arch resnet,vgg,...] [--formats onnx,pt2]
        [--noise-std 0.05] [--alphas 1e-3,3e-3,1e-2,3e-2,1e-1] [--write]

The crop is the astronaut's face from scikit-image's wheel: no calibration and no other
benchmark chose anything on it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from benchmarks._common import load_average, write_section

SIDE = 64
ALPHAS = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
MARK_START, MARK_END = "<!-- vision-slices:start -->", "<!-- vision-slices:end -->"


def slices() -> dict[str, nn.Module]:
    """The architectures of the vision-network issue, cut where each kind first appears."""
    import torchvision

    torch.manual_seed(0)
    r = torchvision.models.resnet18(weights=None)
    v = torchvision.models.vgg11(weights=None)
    a = torchvision.models.alexnet(weights=None)
    m = torchvision.models.mobilenet_v2(weights=None)
    s = torchvision.models.squeezenet1_1(weights=None)
    return {"resnet": nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool, r.layer1),
            "vgg": v.features[:6],
            "alexnet": a.features[:6],
            "mobilenet": m.features[:4],
            "squeezenet": s.features[:5]}


#: Parts of the resnet slice, run only when named (``--arch``): where the lifted model loses.
PART_NAMES = ("resnet-stem", "resnet-blocks", "resnet-block1")


def parts() -> dict[str, nn.Module]:
    import torchvision

    torch.manual_seed(0)  # the same weights as slices()' resnet
    r = torchvision.models.resnet18(weights=None)
    modules = (nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool),
               nn.Sequential(r.conv1, r.bn1, r.relu, r.layer1),
               nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool, r.layer1[0]))
    return dict(zip(PART_NAMES, modules, strict=True))


def picture(folder: Path, side: int = SIDE) -> Path:
    """A side x side colour crop of scikit-image's astronaut (the face, 2x subsampled at 64,
    the 256-pixel face area resampled at other sides), saved as PNG."""
    from PIL import Image
    from skimage import data

    face = data.astronaut()[40:40 + 2 * SIDE * 2, 180:180 + 2 * SIDE * 2]  # 256 x 256
    if side == SIDE:
        img = data.astronaut()[40:40 + 2 * SIDE:2, 180:180 + 2 * SIDE:2]
    else:
        img = np.asarray(Image.fromarray(np.ascontiguousarray(face)).resize(
            (side, side), Image.Resampling.LANCZOS))
    path = folder / f"astronaut{side}.png"
    Image.fromarray(np.ascontiguousarray(img)).save(path)
    return path


def export(module: nn.Module, folder: Path, name: str, fmt: str, side: int = SIDE) -> Path:
    example = (torch.rand(1, 3, side, side),)
    path = folder / f"{name}.{fmt}"
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        if fmt == "onnx":
            torch.onnx.export(module, example, str(path))
        else:
            torch.export.save(torch.export.export(module, example), str(path))
    return path


def run_lbi(network: Path, image: Path, out: Path, std: float,
            extra: tuple[str, ...] = (), timeout: float | None = None) -> dict:
    """``lbi invert`` at its defaults (plus ``extra`` arguments) in a subprocess; past
    ``timeout`` seconds its whole process group is killed and the row says so."""
    start = time.perf_counter()
    peak = out.parent / f"{out.name}.peak"  # GNU time's maximum resident set, KiB
    proc = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", str(peak),
                             sys.executable, "-m", "lbi_engine.cli", "invert", "--network",
                             str(network), "--image", str(image), "--noise-std", str(std),
                             "--out", str(out), "--overwrite", "--quiet", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own group: a timeout ends it all
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"error": f"timed out after {timeout:.0f} s", "timeout": True}
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        return {"error": stderr.strip().splitlines()[-1] if stderr.strip() else "failed"}
    peak_gb = int(peak.read_text().split()[-1]) * 1024 / 1e9
    doc = json.loads((out / "result.json").read_text())
    m = doc["metrics"]
    return {"wall_s": wall, "psnr": m["psnr"], "iterations": m["iterations"],
            "alpha": m["alpha"], "stop": m.get("stop_reason", ""),
            "decoder": m.get("decoder_psnr"), "peak_gb": peak_gb}


def lbi_data(lbi_out: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, x_true) of the run in ``lbi_out``: its noisy data rebuilt from result.json's
    request (same seed), float32."""
    from lbi_engine import api
    from lbi_engine.request import InversionRequest

    request = InversionRequest.from_dict(
        json.loads((lbi_out / "result.json").read_text())["request"])
    problem = api.prepare(request).problem  # the noisy y lbi inverted
    return problem.y_delta.to(torch.float32), problem.x_true.to(torch.float32)


def lbfgs_curves(module: nn.Module, y: torch.Tensor, truth: torch.Tensor,
                 alphas: tuple[float, ...], iters: int = 300) -> dict[float, list]:
    """``_hand_written.lbfgs_curve`` through ``module`` for each alpha, from x = 1/2 (at
    x = 0 a bias-free convolution followed by ReLU has gradient 0)."""
    from benchmarks._hand_written import lbfgs_curve

    module.requires_grad_(False)

    class Shifted:  # start at x = 1/2; TV and PSNR do not see the shift
        @staticmethod
        def forward(v: torch.Tensor) -> torch.Tensor:
            return module(v + 0.5)

    return {alpha: lbfgs_curve(Shifted, y, truth - 0.5, alpha, iters=iters)
            for alpha in alphas}


def run_lbfgs(module: nn.Module, lbi_out: Path, alphas: tuple[float, ...]) -> dict:
    y, truth = lbi_data(lbi_out)
    best: dict = {"psnr": -np.inf}
    for alpha, curve in lbfgs_curves(module, y, truth, alphas).items():
        if curve[-1][1] > best["psnr"]:
            best = {"psnr": curve[-1][1], "seconds": curve[-1][0], "iterations": len(curve),
                    "alpha": alpha, "peak": max(c[1] for c in curve)}
    return best


def verdict(lbi: dict, ref: dict) -> str:
    if "error" in lbi:
        return "refused"
    close = lbi["psnr"] >= ref["psnr"] - 1.0
    fast = lbi["wall_s"] <= max(60.0, 2.0 * ref["seconds"])
    return ("yes" if close else "no") + " / " + ("yes" if fast else "no")


def run(arch: list[str] | None, formats: list[str], std: float,
        alphas: tuple[float, ...], side: int = SIDE) -> list[str]:
    rows = ["| network | file | lbi PSNR | lbi wall (s) | peak RSS (GB) | iterations | α auto | "
            "stop | L-BFGS PSNR (best α) | its α | its time (s) | within 1 dB / in time |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        image = picture(folder, side)
        chosen = {**slices(), **(parts() if arch else {})}
        for name, module in chosen.items():
            if arch and name not in arch:
                continue
            module = module.eval()
            ref = None
            for fmt in formats:
                path = export(module, folder, name, fmt, side)
                lbi = run_lbi(path, image, folder / f"{name}-{fmt}", std)
                if "error" in lbi:
                    rows.append(f"| {name} | {fmt} | refused: {lbi['error'][:80]} |"
                                " | | | | | | | | |")
                    print(rows[-1], flush=True)
                    continue
                if ref is None:  # one reference per network: the same y for both files
                    ref = run_lbfgs(module, folder / f"{name}-{fmt}", alphas)
                rows.append(
                    f"| {name} | {fmt} | {lbi['psnr']:.2f} | {lbi['wall_s']:.1f} | "
                    f"{lbi['peak_gb']:.2f} | "
                    f"{lbi['iterations']} | {lbi['alpha']:.3g} | {lbi['stop']} | "
                    f"{ref['psnr']:.2f} | {ref['alpha']:.3g} | {ref['seconds']:.1f} | "
                    f"{verdict(lbi, ref)} |")
                print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_graph_slices",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="")
    parser.add_argument("--formats", default="onnx,pt2")
    parser.add_argument("--noise-std", type=float, default=0.05)
    parser.add_argument("--alphas", default=",".join(str(a) for a in ALPHAS))
    parser.add_argument("--side", type=int, default=SIDE, help="image side (pixels)")
    parser.add_argument("--write", action="store_true", help="write the table to RESULTS.md")
    args = parser.parse_args(argv)
    load = load_average()
    alphas = tuple(float(v) for v in args.alphas.split(","))
    rows = run([s for s in args.arch.split(",") if s] or None,
               [s for s in args.formats.split(",") if s], args.noise_std, alphas, args.side)
    # the default table, one per other side, and one for the resnet's parts: a run of a few
    # architectures never replaces the default table
    named_parts = bool(set(args.arch.split(",")) & set(PART_NAMES))
    key = (f" {args.side}" if args.side != SIDE else "") + (" parts" if named_parts else "")
    start, end = (MARK_START, MARK_END) if not key else \
        (f"<!-- vision-slices{key}:start -->", f"<!-- vision-slices{key}:end -->")
    if args.write and not key and args.arch:
        parser.error("--write with --arch replaces the default table: run all architectures")
    options = "".join(f" --{k} {v}" for k, v in (("arch", args.arch),
                                                 ("formats", args.formats)) if v) \
        if key else ""
    options += f" --side {args.side}" if args.side != SIDE else ""
    text = "\n".join([
        start, f"## Vision networks at lbi's defaults vs hand-written L-BFGS"
        f"{'' if args.side == SIDE else f' ({args.side}x{args.side})'}",
        "", f"`PYTHONPATH=. python -m benchmarks.bench_graph_slices{options} --write`: "
        f"torchvision slices with random weights (seed 0), a {args.side}x{args.side} colour "
        f"crop of scikit-image's astronaut, noise std {args.noise_std}; lbi: `lbi invert "
        f"--network F --image astronaut{args.side}.png --noise-std {args.noise_std}` in a "
        f"subprocess (wall time, start-up included; peak RSS by GNU time); "
        f"L-BFGS: through the torch module on lbi's noisy y, final iterate at its best α of "
        f"{list(alphas)} (time to it; the grid itself not counted). The bar of the vision "
        "issue: within 1 dB of L-BFGS, in at most max(60 s, 2x its time). Load average "
        f"{load} at the start.", "", *rows, "", end])
    print(text)
    if args.write:
        write_section(text, start, end)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
