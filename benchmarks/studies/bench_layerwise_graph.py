"""Does layer-wise inversion work over graphs, and against joint?

Layer-wise inversion over graphs against the joint method, on the vision slices.

For the residual, concatenating and inverted-residual slices of ``bench_graph_slices``
(resnet18 stem + layer1, squeezenet1_1 stem + two Fire modules, mobilenet_v2
``features[:4]``; random weights, seed 0; exported with ``torch.export.save``), as a user runs
them:

    lbi feature-prior f.pt2 --samples natural200.npy --out f.prior
    lbi invert --network f.pt2 --image astronaut64.png --noise-std 0.05 --threads 1 \\
        --method layerwise --feature-prior f.prior
    lbi invert --network f.pt2 --image astronaut64.png --noise-std 0.05 --threads 1

The feature prior's samples: 200 colour 64 x 64 windows of the bundled natural training
photographs (``lbi_engine.data.datasets._natural_patch``; the astronaut is in the validation
split, never here). Prints PSNR and wall time (start-up, reading and lifting included).

    python -m benchmarks.studies.bench_layerwise_graph [--arch resnet,squeezenet,mobilenet]

``--small`` instead measures the sweeps on the small residual network of
tests/cli/test_layerwise_graph.py (12 x 12, sigma 0.05, its 300 rectangles as the prior's
samples): one backward sweep, two (the default), and an oracle whose provisional states are the
truth's, at the input alpha 0.01 given, then both methods at their defaults.

``--diagnose PRIOR`` runs layer-wise on ``natural-res-ae``'s validation patch 0 (σ 0.05, TV,
input alpha 0.003 given) with the feature prior PRIOR and prints each state's relative error
against the truth's forward states, the prior mean's, and the same with 4 and 10 sweeps.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.bench_graph_slices import export, picture, slices

ARCHS = ("resnet", "squeezenet", "mobilenet")
SAMPLES = 200


def natural_samples(path: Path, count: int = SAMPLES, side: int = 64) -> Path:
    from lbi_engine.data.datasets import _natural_patch, dataset_size

    n = dataset_size("natural", "train") or 0
    index = np.linspace(0, n - 1, count).round().astype(int)
    patches = np.stack([_natural_patch("train", int(i), side) for i in index])
    np.save(path, (patches.astype(np.float32) / 255.0).transpose(0, 3, 1, 2).copy())
    return path


def lbi(*args: str) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "lbi_engine.cli", *args], capture_output=True,
                          text=True, check=False)
    return time.perf_counter() - start, proc


def small_network() -> None:
    """The sweeps on the test's residual network (module docstring)."""
    import torch

    import lbi_engine.solvers.layerwise as lw
    from lbi_engine.api import InversionRequest, prepare, run_to_end
    from lbi_engine.settings.solver import SolverOptions
    from lbi_engine.solvers import StopRule, final
    from tests.cli.test_layerwise_graph import _files

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        network, clean, truth = _files(Path(tmp))
        prior = Path(tmp) / "p"
        _, proc = lbi("feature-prior", str(network), "--samples", str(clean), "--rank", "16",
                      "--out", str(prior))
        assert proc.returncode == 0, proc.stderr
        common = {"network": str(network), "truth": str(truth), "noise_std": 0.05,
                  "threads": 1}
        problem = prepare(InversionRequest(**common, method="layerwise", alpha=0.01,
                                           feature_prior=str(prior))).problem
        stop = StopRule(max_iter=3000, tol=1e-4, tol_mode="relative")
        options = SolverOptions.from_dict({"input_alpha": "given"})

        def psnr() -> float:
            return float(final(lw.run_layerwise(problem, stop, options, None, None, 100))
                         .psnr[0])

        default_sweeps, default_start = lw.GRAPH_SWEEPS, lw.backprojection_start
        lw.GRAPH_SWEEPS = 1
        print(f"alpha 0.01 given: one sweep {psnr():.2f} dB", end="")
        lw.backprojection_start = lambda p: p.x_true.clone()
        print(f", one sweep from the truth's states (oracle) {psnr():.2f} dB", end="")
        lw.GRAPH_SWEEPS, lw.backprojection_start = default_sweeps, default_start
        print(f", two sweeps {psnr():.2f} dB")
        for method, extra in (("layerwise", {"feature_prior": str(prior)}), ("joint", {})):
            _, last, _ = run_to_end(InversionRequest(**common, method=method, **extra))
            print(f"defaults: {method} {float(last.psnr[0]):.2f} dB "
                  f"(alpha {last.choice.alpha if last.choice else float('nan'):.3g})")


def diagnose(prior: str) -> None:
    """Where layer-wise loses on a trained residual network (module docstring)."""
    import torch

    import lbi_engine.solvers.layerwise as lw
    from lbi_engine.api import InversionRequest, prepare
    from lbi_engine.settings.solver import SolverOptions
    from lbi_engine.solvers import StopRule, final

    torch.set_num_threads(1)
    problem = prepare(InversionRequest(
        network="natural-res-ae", dataset="natural", split="val", index=0, noise_std=0.05,
        method="layerwise", feature_prior=prior, threads=1, alpha=0.003,
        regulariser="tv")).problem
    true = problem.network.forward_states(problem.x_true)[:-1]
    stop = StopRule(max_iter=3000, tol=1e-4, tol_mode="relative")
    options = SolverOptions.from_dict({"input_alpha": "given"})

    def errors(states: list) -> list[float]:
        return [round(float((a - t).norm() / t.norm()), 3)
                for a, t in zip(states, true, strict=True)]

    print("prior mean: relative error per state",
          errors([p.mean_like(t) for p, t in zip(problem.feature_priors.layers, true,
                                                  strict=True)]))
    for sweeps in (2, 4, 10):
        lw.GRAPH_SWEEPS = sweeps
        last = final(lw.run_layerwise(problem, stop, options, None, None, 100))
        print(f"{sweeps} sweeps: PSNR {float(last.psnr[0]):.2f} dB, relative error per state",
              errors(last.aux))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.studies.bench_layerwise_graph")
    parser.add_argument("--arch", default=",".join(ARCHS))
    parser.add_argument("--noise-std", default="0.05")
    parser.add_argument("--small", action="store_true", help="the sweeps on a small network")
    parser.add_argument("--diagnose", metavar="PRIOR", help="natural-res-ae's states")
    args = parser.parse_args(argv)
    if args.small:
        small_network()
        return 0
    if args.diagnose:
        diagnose(args.diagnose)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        image = picture(folder)
        samples = natural_samples(folder / "natural200.npy")
        modules = slices()
        print("| slice | fit s | layer-wise PSNR | s | joint PSNR | s |")
        print("|---|---|---|---|---|---|")
        for name in args.arch.split(","):
            net = export(modules[name].eval(), folder, name, "pt2")
            prior = folder / f"{name}.prior"
            fit, proc = lbi("feature-prior", str(net), "--samples", str(samples),
                            "--out", str(prior))
            if proc.returncode:
                print(f"| {name} | failed: {proc.stderr.strip().splitlines()[-1]} |")
                continue
            row = [name, f"{fit:.1f}"]
            for method in ("layerwise", "joint"):
                out = folder / f"{name}-{method}"
                extra = ["--method", "layerwise", "--feature-prior", str(prior)] \
                    if method == "layerwise" else []
                wall, proc = lbi("invert", "--network", str(net), "--image", str(image),
                                 "--noise-std", args.noise_std, "--threads", "1", "--out",
                                 str(out), "--quiet", *extra)
                if proc.returncode:
                    row += [f"failed: {proc.stderr.strip().splitlines()[-1]}", ""]
                    continue
                metrics = json.loads((out / "result.json").read_text())["metrics"]
                row += [f"{metrics['psnr']:.2f} (alpha {metrics['alpha']:.3g})", f"{wall:.1f}"]
            print("| " + " | ".join(row) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
