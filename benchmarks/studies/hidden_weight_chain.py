"""On a chain, does the lifted relaxation absorb the fit, and does the hidden weight pin it?

The hidden-layer weight on a chain (MATH.md §5.7): does the relaxation absorb the fit there too?

On a calibration case of ``benchmarks.heldout`` (a photograph and seed of the calibration
half, random weights, noise 1 % of the output's RMS), at a fixed alpha: hand-written L-BFGS
on 1/2 ||N(x) - y||^2 + alpha TV_eps(x) from mid-grey through lbi's lifted network's own
forward, then lbi's joint method at hidden weight w from that point (x_0 the L-BFGS result,
the auxiliary variables its forward states: a feasible point), for each w of ``--weights``.
At w = 1 the lifted minimiser drifts from the network's inverse when the hidden states can
absorb the fit; a larger w pins them to the forward (MATH.md §5.7's (I + M/w)^-1 norm).

    PYTHONPATH=. python -m benchmarks.studies.hidden_weight_chain [--arch vgg11] [--photo coffee]
        [--seed 2] [--alpha 1e-3] [--weights 1,10,100] [--max-iter 1000] [--write]

``--defaults`` instead runs ``lbi invert --network F --image crop.png --noise-std S --seed K
--threads 1`` on the same case as a user does, once at the defaults and once with
``--option hidden_weight=1`` (the earlier rule on a chain: never raised).
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import torch

from benchmarks._common import load_average, write_section
from benchmarks._hand_written import _tv_eps
from benchmarks.heldout import design, nets
from benchmarks.heldout.measure import export


def _lbfgs(forward, y, x0, alpha: float, iters: int = 300) -> torch.Tensor:
    x = x0.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([x], lr=1, max_iter=1, history_size=20,
                            line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = 0.5 * (forward(x) - y).pow(2).sum() + alpha * _tv_eps(x, 1e-3)
        loss.backward()
        return loss

    for _ in range(iters):
        opt.step(closure)
    return x.detach()


def _files(folder: Path, arch: str, photo: str, seed: int) -> tuple[torch.nn.Module, Path, Path]:
    """The case's module (random weights from ``seed``), its exported file and the crop."""
    module = nets.build(arch, seed)
    network = export(module, folder / f"{arch}.{nets.arch(arch).fmt}", design.SIDE)
    return module, network, design.write_png(photo, design.SIDE, folder)


def run(arch: str, photo: str, seed: int, alpha: float, weights: list[float],
        max_iter: int) -> list[str]:
    from lbi_engine import api, metrics
    from lbi_engine.request import InversionRequest
    from lbi_engine.settings.solver import SolverOptions, StopRule
    from lbi_engine.solvers import final, solve

    torch.set_num_threads(1)
    rows = ["| start / solve | w | PSNR (dB) | ‖N(x)−y‖ | iterations | stop | seconds |",
            "|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        _, network, image = _files(Path(tmp), arch, photo, seed)
        clean = api.prepare(InversionRequest(network=str(network), image=str(image),
                                             noise_std=0.0)).problem.y_delta
        std = 0.01 * float(clean.pow(2).mean().sqrt())
        problem = api.prepare(InversionRequest(network=str(network), image=str(image),
                                               noise_std=std, seed=seed)).problem
        problem = dataclasses.replace(problem, alpha=alpha, extras=dict(problem.extras))
        truth, y = problem.x_true, problem.y_delta
        mid = torch.full_like(truth, 0.5 * problem.data_range - problem.display_offset)
        clock = time.perf_counter()
        x = _lbfgs(problem.network.forward, y, mid, alpha)
        with torch.no_grad():
            residual = float((problem.network.forward(x) - y).norm())
        psnr = float(metrics.psnr(x, truth, data_range=problem.data_range)[0])
        rows.append(f"| L-BFGS (300 steps) | – | {psnr:.2f} | {residual:.3f} | 300 | cap | "
                    f"{time.perf_counter() - clock:.1f} |")
        print(rows[-1], flush=True)
        for w in weights:
            clock = time.perf_counter()
            last = final(solve(problem, "joint", stop=StopRule(max_iter=max_iter),
                               options=SolverOptions(hidden_weight=w),
                               init={"x": x.clone()}, report_every=50))
            rows.append(f"| joint from it | {w:g} | {float(last.psnr[0]):.2f} | "
                        f"{float(last.discrepancy[0]):.3f} | {last.iteration} | "
                        f"{last.stop_reason} | {time.perf_counter() - clock:.1f} |")
            print(rows[-1], flush=True)
    return rows


def run_defaults(arch: str, photo: str, seed: int) -> list[str]:
    """The case at lbi's defaults and with the weight held at 1, in subprocesses."""
    import json

    from benchmarks.bench_graph_slices import run_lbi

    rows = ["| run | PSNR (dB) | α | hidden weight | solver steps | wall (s) |",
            "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        module, network, image = _files(folder, arch, photo, seed)
        truth = torch.from_numpy(design.photograph(photo, design.SIDE).transpose(2, 0, 1)
                                 .copy())
        with torch.no_grad():
            std = 0.01 * float(module(truth[None].float() / 255).pow(2).mean().sqrt())
        for name, extra in (("defaults", ()), ("hidden_weight=1", ("--option",
                                                                    "hidden_weight=1"))):
            out = folder / name
            lbi = run_lbi(network, image, out, std, ("--seed", str(seed), "--threads", "1",
                                                     *extra))
            m = json.loads((out / "result.json").read_text())["metrics"]
            steps = sum(s["iterations"] for s in m.get("time_split") or [])
            rows.append(f"| {name} | {lbi['psnr']:.2f} | {lbi['alpha']:.3g} | "
                        f"{m.get('hidden_weight', 1.0):g} | {steps} | {lbi['wall_s']:.0f} |")
            print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.studies.hidden_weight_chain",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="vgg11")
    parser.add_argument("--photo", default="coffee", choices=list(design.PHOTOS["calibrate"]))
    parser.add_argument("--seed", type=int, default=2, choices=design.SEEDS["calibrate"])
    parser.add_argument("--alpha", type=float, default=1e-3)
    parser.add_argument("--weights", default="1,10,100")
    parser.add_argument("--max-iter", type=int, default=1000)
    parser.add_argument("--defaults", action="store_true",
                        help="lbi invert at the defaults vs hidden_weight=1 on the case")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    load = load_average()
    if args.defaults:
        rows = run_defaults(args.arch, args.photo, args.seed)
        key, title = "hidden-weight-chain-defaults", "at lbi's defaults, "
        head = (f"`PYTHONPATH=. python -m benchmarks.studies.hidden_weight_chain --defaults --arch "
                f"{args.arch} --photo {args.photo} --seed {args.seed} --write`: the case below "
                "run as a user does (`lbi invert ... --threads 1`, noise 1 % of the output's "
                f"RMS, seed {args.seed}), at the defaults and with the weight held at 1. Load "
                f"average {load} at the start; wall times of one run, both under that load.")
    else:
        rows = run(args.arch, args.photo, args.seed, args.alpha,
                   [float(w) for w in args.weights.split(",")], args.max_iter)
        key, title, head = "hidden-weight-chain", "", _command(args, load)
    start, end = f"<!-- {key}:start -->", f"<!-- {key}:end -->"
    text = "\n".join([start, f"## The hidden weight on a chain ({title}calibration half)",
                      "", head, "", *rows, "", end])
    if args.write:
        write_section(text, start, end)
    print(text)
    return 0


def _command(args: argparse.Namespace, load: float | None) -> str:
    """The section's first paragraph: the command that wrote it and what it measured."""
    return (f"`PYTHONPATH=. python -m benchmarks.studies.hidden_weight_chain --arch {args.arch} "
            f"--photo {args.photo} --seed {args.seed} --alpha {args.alpha:g} --weights "
            f"{args.weights} --max-iter {args.max_iter} --write`: random {args.arch} slice "
            f"(seed {args.seed}), 64x64 {args.photo} crop of the calibration half, noise 1 % "
            f"of the output's RMS, alpha {args.alpha:g} fixed; L-BFGS through lbi's lifted "
            "forward from mid-grey, then the joint method at hidden weight w from its result. "
            f"Load average {load} at the start (times: one thread, this run).")


if __name__ == "__main__":
    raise SystemExit(main())
