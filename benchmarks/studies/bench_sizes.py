"""How do lbi's step cost and results scale to natural image sizes?

Inversion at natural sizes: a user's 64x64 grey LeNet-like encoder and plain conv-ReLU
chains on 64x64x3 and 128x128x3 inputs with 32-64 first-layer channels (random
initialisation, seed 0).

``PYTHONPATH=. python -m benchmarks.studies.bench_sizes [--quick] [--write] [--only NAME ..]
[--budget SECONDS]`` (one torch thread). Per geometry:

* per iteration: seconds per step of the joint method (fixed alpha, no stop by tolerance)
  against one forward + one backward pass of the same ``nn.Module`` through autograd, the
  gradient in x only (what a gradient of 1/2 ||E(x) - y||^2 costs a PyTorch user), in
  interleaved rounds; the ratio
  is the median of the per-round ratios (``_common.interleaved``);
* at the defaults: ``lbi invert --network NET.onnx --truth X.npy --noise-std 0.05`` in a
  child process (exported by ``torch.onnx.export``; auto-alpha by the discrepancy rule,
  tol 1e-4, 10,000-iteration cap per solve), with ``--time-budget`` (``--budget``) so that
  one geometry cannot hold the run for an hour: wall time (start-up included), iterations
  over the alpha path and the final solve, stop reason, PSNR, and the child's peak RSS
  (``os.wait4``) beside the memory the CLI estimated before allocating (``--memory-limit``
  refuses above it);
* hand-written ``torch.optim.LBFGS`` on 1/2 ||E(x) - y||^2 + alpha TV_eps(x)
  (``_hand_written.lbfgs_curve``) at its best alpha of a grid: PSNR and seconds.

The ground truth is scikit-image's ``astronaut`` (colour) or ``camera`` (grey), resized.
``--write`` replaces this benchmark's section of RESULTS.md (between its markers).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from benchmarks._common import (
    interleaved,
    load_average,
    machine,
    median,
    ratio_median,
    write_section,
)

MARK_START = "<!-- bench_sizes: start -->"
MARK_END = "<!-- bench_sizes: end -->"
NOISE = 0.05
LBFGS_GRID = (1e-4, 1e-3, 1e-2)


@dataclass
class Geometry:
    name: str
    input_shape: tuple[int, int, int]
    build: Callable[[], nn.Module]
    note: str


def _lenet(side: int = 64, code: int = 120) -> nn.Module:
    after = ((side - 4) // 2 - 4) // 2
    return nn.Sequential(nn.Conv2d(1, 6, 5), nn.Tanh(), nn.AvgPool2d(2), nn.Conv2d(6, 16, 5),
                         nn.Tanh(), nn.AvgPool2d(2), nn.Flatten(),
                         nn.Linear(16 * after * after, code))


def _chain(channels: int, last: int = 16) -> nn.Module:
    """conv 3x3 (stride 1) -> ReLU -> conv 3x3 stride 2 -> ReLU -> conv 3x3 stride 2: a code
    of ``last`` channels at a quarter of the side."""
    return nn.Sequential(nn.Conv2d(3, channels, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(channels, channels, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Conv2d(channels, last, 3, stride=2, padding=1))


GEOMETRIES = {
    "lenet64": Geometry("lenet64", (1, 64, 64), _lenet,
                        "grey 64x64: conv 1->6 k5, tanh, avgpool 2, conv 6->16 k5, tanh, "
                        "avgpool 2, linear -> 120"),
    "chain64x3": Geometry("chain64x3", (3, 64, 64), lambda: _chain(32),
                          "64x64x3: conv 3->32, ReLU, conv 32->32 s2, ReLU, conv 32->16 s2"),
    "chain128x3": Geometry("chain128x3", (3, 128, 128), lambda: _chain(64),
                           "128x128x3: conv 3->64, ReLU, conv 64->64 s2, ReLU, conv 64->16 s2"),
}
#: tiny stand-ins of the same kinds for --quick (and the smoke test)
QUICK = {
    "lenet64": Geometry("lenet64", (1, 24, 24), lambda: _lenet(24, 10), "grey 24x24 LeNet"),
    "chain64x3": Geometry("chain64x3", (3, 16, 16), lambda: _chain(8, 4), "16x16x3 chain"),
    "chain128x3": Geometry("chain128x3", (3, 16, 16), lambda: _chain(8, 4), "16x16x3 chain"),
}


def module_of(geometry: Geometry) -> nn.Module:
    torch.manual_seed(0)
    return geometry.build().eval()


def truth_of(shape: tuple[int, int, int]) -> np.ndarray:
    """A natural image in [0, 1] of ``shape`` (C, H, W), from scikit-image's sample data."""
    from skimage import data, transform

    c, h, w = shape
    image = data.astronaut() if c == 3 else data.camera()
    image = transform.resize(image.astype(np.float64) / 255.0, (h, w), anti_aliasing=True)
    array = image.transpose(2, 0, 1) if c == 3 else image[None]
    return np.ascontiguousarray(array, dtype=np.float32)


def _problem(module: nn.Module, truth: np.ndarray, alpha: float) -> Any:
    from lbi_engine.models.network import LiftedNetwork
    from lbi_engine.problem import InversionProblem
    from lbi_engine.regularisers import make_regulariser

    network = LiftedNetwork.from_module(module, truth.shape)
    x = torch.from_numpy(truth)[None]
    g = torch.Generator().manual_seed(0)
    y = network.forward(x)
    y = y + NOISE * torch.randn(y.shape, generator=g)
    return InversionProblem(network, y, make_regulariser("tv"), alpha, x_true=x)


def per_iteration(module: nn.Module, truth: np.ndarray, steps: int, rounds: int,
                  alpha: float = 1e-3) -> dict[str, float]:
    """Seconds per joint step and per forward + backward pass of ``module``, interleaved."""
    from lbi_engine.solvers import StopRule, final, solve

    problem = _problem(module, truth, alpha)
    stop = StopRule(max_iter=steps, tol=0)
    for parameter in module.parameters():  # the floor is the gradient in x alone
        parameter.requires_grad_(False)
    x = torch.from_numpy(truth)[None].clone().requires_grad_(True)
    y = problem.y_delta.detach()

    def joint() -> None:
        final(solve(problem, "joint", stop=stop))

    def gradient() -> None:
        for _ in range(steps):
            x.grad = None
            (0.5 * (module(x) - y).pow(2).sum()).backward()

    joint()  # builds (norms, kernels, index caches) outside the rounds
    samples = interleaved({"joint": joint, "floor": gradient}, rounds=rounds)
    return {"step": median(samples["joint"]) / steps, "floor": median(samples["floor"]) / steps,
            "ratio": ratio_median(samples, "joint", "floor")}


#: Runs argv[1:] in place (runpy, so the memory map is this small program's) and prints its
#: VmHWM on stderr at exit.
_HWM = (
    "import atexit, runpy, sys\n"
    "def _hwm():\n"
    "    with open('/proc/self/status') as f:\n"
    "        kb = [ln.split()[1] for ln in f if ln.startswith('VmHWM:')]\n"
    "    print('lbi-bench-vmhwm-kb', kb[0] if kb else 0, file=sys.stderr)\n"
    "atexit.register(_hwm)\n"
    "module = sys.argv[1]\n"
    "sys.argv = [module, *sys.argv[2:]]\n"
    "runpy.run_module(module, run_name='__main__', alter_sys=True)\n"
)


def _peak_kb(stderr: str) -> float:
    marks = [ln.split()[1] for ln in stderr.splitlines() if ln.startswith("lbi-bench-vmhwm-kb")]
    return float(marks[-1]) if marks else float("nan")


def at_defaults(module: nn.Module, truth: np.ndarray, budget: float | None,
                max_iter: int | None = None) -> dict[str, Any]:
    """``lbi invert`` at its defaults on the module's ONNX export, in a child process."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        onnx_path, truth_path, out = folder / "net.onnx", folder / "x.npy", folder / "out"
        with torch.no_grad(), warnings.catch_warnings():  # the legacy exporter's notice
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(module, (torch.from_numpy(truth)[None],), str(onnx_path),
                              dynamo=False)
        np.save(truth_path, truth)
        command = [sys.executable, "-m", "lbi_engine.cli", "invert", "--network",
                   str(onnx_path), "--truth", str(truth_path), "--noise-std", str(NOISE),
                   "--threads", "1", "--out", str(out), "-q"]
        if budget is not None:
            command += ["--time-budget", str(budget)]
        if max_iter is not None:
            command += ["--max-iter", str(max_iter)]
        start = time.perf_counter()
        # The run's own high-water mark: a process forked from this one (torch loaded) starts
        # with this process's resident pages counted, and Linux carries that into the child's
        # ru_maxrss across exec; VmHWM of the exec'd program's memory map does not include it.
        command = [sys.executable, "-c", _HWM, *command[2:]]  # the module and its arguments
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env={**os.environ, "PYTHONWARNINGS": "ignore"})
        _, status, _usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        stderr = child.stderr.read().decode() if child.stderr else ""
        if status != 0:
            raise RuntimeError(f"lbi invert failed ({status}): {stderr[-2000:]}")
        metrics = json.loads((out / "result.json").read_text())["metrics"]
    path = metrics.get("alpha_path") or []
    return {"wall": wall, "iterations": int(metrics.get("iterations") or 0),
            "path_solves": len(path), "stop": metrics.get("stop_reason"),
            "alpha": metrics.get("alpha"), "psnr": metrics.get("psnr"),
            "peak_rss_mb": _peak_kb(stderr) / 1024.0}


def lbfgs_best(module: nn.Module, truth: np.ndarray, iters: int) -> dict[str, Any]:
    """Hand-written L-BFGS at each grid alpha: the best final PSNR, its alpha and seconds."""
    from benchmarks._hand_written import lbfgs_curve

    problem = _problem(module, truth, 1.0)
    x = torch.from_numpy(truth)[None]
    best: dict[str, Any] = {"psnr": -np.inf}
    for alpha in LBFGS_GRID:
        curve = lbfgs_curve(problem.network, problem.y_delta.detach(), x, alpha, iters=iters)
        if curve and curve[-1][1] > best["psnr"]:
            best = {"psnr": curve[-1][1], "alpha": alpha, "seconds": curve[-1][0]}
    return best


def measure(name: str, quick: bool, budget: float | None) -> dict[str, Any]:
    geometry = (QUICK if quick else GEOMETRIES)[name]
    module = module_of(geometry)
    truth = truth_of(geometry.input_shape)
    steps, rounds = (3, 2) if quick else (20, 5)
    row: dict[str, Any] = {"name": name, "note": geometry.note,
                           "shape": list(geometry.input_shape)}
    row.update(per_iteration(module, truth, steps, rounds))
    row.update(at_defaults(module, truth, budget, max_iter=30 if quick else None))
    row["lbfgs"] = lbfgs_best(module, truth, iters=5 if quick else 300)
    return row


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| geometry | step (ms) | fwd+bwd (ms) | ratio | iterations (solves) | stop | "
             "wall at defaults (s) | PSNR (dB) | L-BFGS best PSNR (dB) / s / alpha | "
             "peak RSS (MB) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lb = r["lbfgs"]
        psnr = "—" if r["psnr"] is None else f"{r['psnr']:.2f}"
        lines.append(
            f"| {r['name']} ({'x'.join(map(str, r['shape']))}) | {r['step'] * 1e3:.2f} | "
            f"{r['floor'] * 1e3:.2f} | {r['ratio']:.2f} | {r['iterations']} "
            f"({r['path_solves']} + 1) | {r['stop']} | {r['wall']:.1f} | {psnr} | "
            f"{lb['psnr']:.2f} / {lb['seconds']:.1f} / {lb['alpha']:g} | "
            f"{r['peak_rss_mb']:.0f} |")
    return lines


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.studies.bench_sizes")
    parser.add_argument("--quick", action="store_true", help="tiny stand-ins (seconds)")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument("--only", nargs="+", choices=list(GEOMETRIES), metavar="NAME")
    parser.add_argument("--budget", type=float, default=600.0,
                        help="--time-budget of each run at the defaults (default 600 s)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    load = load_average()
    rows = []
    for name in args.only or list(GEOMETRIES):
        rows.append(measure(name, args.quick, args.budget))
        print(table(rows[-1:])[-1], flush=True)
    command = "PYTHONPATH=. python -m benchmarks.studies.bench_sizes" + (
        " --quick" if args.quick else "") + (f" --only {' '.join(args.only)}"
                                              if args.only else "") + (
        f" --budget {args.budget:g}" if args.budget != 600.0 else "") + " --write"
    info = machine()
    shown_load = "?" if load is None else f"{load:.1f}"
    lines = [MARK_START, "## Inversion at natural sizes (bench_sizes)", "",
             f"`{command}` — {info.get('cpu', '?')}, {info['cpu_count']} cores, torch "
             f"{info['torch']}, one torch thread; load average {shown_load} at the start"
             + (" (quick: tiny stand-ins, indicative only)" if args.quick else "") + ".",
             "step: one joint iteration at a fixed alpha; fwd+bwd: one forward and one "
             "backward pass of the module through autograd; ratio: median of per-round "
             "ratios. The defaults run is `lbi invert --network NET.onnx --truth X.npy "
             f"--noise-std {NOISE} --threads 1` with `--time-budget {args.budget:g}`; "
             "iterations are summed over the alpha path's solves and the final solve. L-BFGS: "
             f"`benchmarks/_hand_written.lbfgs_curve` at alpha in {list(LBFGS_GRID)}.", "",
             *table(rows), "", *[f"- {r['name']}: {r['note']}" for r in rows], MARK_END]
    text = "\n".join(lines)
    if args.write:
        write_section(text, MARK_START, MARK_END)
    print(text)
    return rows


if __name__ == "__main__":
    main()
