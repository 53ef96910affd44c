"""Which discrepancy factor TAU and first guess GUESS should alpha "auto" use?

The constants of alpha "auto" (solvers/alpha/whole.py), measured on TRAINING digits from
converged solves: the discrepancy factor TAU and the first guess's factor GUESS.

``PYTHONPATH=. python -m benchmarks.studies.calibrate_alpha [--network NAME] [--digits 3,70,...]``

For each noise level and training digit: a warm-started descending alpha grid (eight points
per decade, each solve run until its objective changes by less than 1e-5 relative), the
residual ||N(x_alpha) - y_delta|| and the PSNR at every point. For a factor tau the
discrepancy alpha is where the residual crosses tau * E||noise|| (log-log interpolation on
the grid, as the search converges to), its PSNR interpolated likewise. Printed per noise level:
the PSNR at the best single grid alpha (mean over the digits, the benchmark's "best grid
alpha") minus the mean PSNR at each tau's alpha: the loss. The tau kept is the one with the
smallest worst loss over the levels (also printed for tau 0.70-0.90 in steps of 0.01). Then
the same for the rule in use (``alpha.tau_for``: tau from the relative noise of the code), and
at the rule's alpha the first guess's factor
alpha * R(x_bp) / (target * ||y_delta||) (``alpha.first_guess``) per digit, min / max.
"""

from __future__ import annotations

import argparse
import math
import statistics

import torch

STDS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.33)
TAUS = (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 1.0)
FINE = tuple(round(0.7 + 0.01 * k, 2) for k in range(21))  # worst loss only, 0.70 .. 0.90
TRAIN_DIGITS = (3, 70, 140, 210, 280, 350)


def grid_curve(prepared: object, alphas: list[float]) -> list[tuple[float, float, float]]:
    """(alpha, residual, PSNR) along the descending grid, warm-started."""
    from lbi_engine.solvers import StopRule, solve, warm_start
    from lbi_engine.solvers.alpha import _warm, _with_alpha

    problem = prepared.problem
    init = None
    out = []
    for alpha in alphas:
        last = None
        for rec in solve(_with_alpha(problem, alpha), "auto",
                         stop=StopRule(max_iter=20_000, tol=1e-5), init=init, report_every=20):
            last = rec
        out.append((alpha, float(last.discrepancy[0]), float(last.psnr[0])))
        init = _warm(last, problem)
    del warm_start
    return out


def at_tau(curve: list[tuple[float, float, float]], target: float) -> tuple[float, float]:
    """(alpha, PSNR) where the residual crosses ``target`` (log-log interpolation on the
    grid; log alpha, PSNR linear)."""
    for (a0, d0, p0), (a1, d1, p1) in zip(curve[:-1], curve[1:], strict=True):
        if d0 >= target >= d1 and d0 > d1:
            t = (math.log(d0) - math.log(target)) / (math.log(d0) - math.log(d1))
            return math.exp(math.log(a0) + t * (math.log(a1) - math.log(a0))), p0 + t * (p1 - p0)
    end = curve[0] if target > curve[0][1] else curve[-1]
    return end[0], end[2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--network", default="mnist-cnn-ae")
    parser.add_argument("--digits", default=",".join(map(str, TRAIN_DIGITS)))
    parser.add_argument("--stds", default=",".join(map(str, STDS)))
    args = parser.parse_args()
    from lbi_engine.api import InversionRequest, prepare
    from lbi_engine.models.zoo import load_zoo
    from lbi_engine.solvers.alpha import expected_noise_norm, tau_for
    from lbi_engine.solvers.joint.start import backprojection_start

    torch.set_num_threads(1)
    bundle = load_zoo(args.network)
    digits = [int(d) for d in args.digits.split(",")]
    alphas = [10 ** (-0.5 - k / 8) for k in range(25)]  # 0.32 .. 3.2e-4
    print(f"network {args.network}, training digits {digits}; loss (dB) = PSNR at the best "
          "grid alpha - mean PSNR at tau's alpha")
    print("| std | best grid alpha | " + " | ".join(f"tau {t:g}" for t in TAUS) + " |")
    worst = {t: 0.0 for t in TAUS}
    worst_fine = {t: 0.0 for t in FINE}
    worst_rule, rows = 0.0, []
    guesses = []
    for std in (float(s) for s in args.stds.split(",")):
        curves, deltas, scales, taus = [], [], [], []
        for d in digits:
            prepared = prepare(InversionRequest(network=args.network, regulariser="tv",
                                                split="train", index=d,
                                                noise_std=std), bundle)
            curves.append(grid_curve(prepared, alphas))
            deltas.append(expected_noise_norm(prepared.problem, std))
            problem = prepared.problem
            taus.append(tau_for(problem, deltas[-1]))
            with torch.no_grad():  # first_guess's scale ||y|| / R(x_bp)
                x_bp = backprojection_start(problem)[:1]
                scales.append(float(problem.y_delta[:1].norm())
                              / float(problem.reg.value(x_bp)[0]))
        mean_grid = [statistics.mean(c[k][2] for c in curves) for k in range(len(alphas))]
        best = max(range(len(alphas)), key=mean_grid.__getitem__)
        losses = []
        for tau in TAUS:
            loss = mean_grid[best] - statistics.mean(
                at_tau(c, tau * dl)[1] for c, dl in zip(curves, deltas, strict=True))
            worst[tau] = max(worst[tau], loss)
            losses.append(loss)
        print(f"| {std:g} | {alphas[best]:.3g} | " + " | ".join(f"{v:+.2f}" for v in losses)
              + " |", flush=True)
        rule = mean_grid[best] - statistics.mean(
            at_tau(c, t * dl)[1] for c, dl, t in zip(curves, deltas, taus, strict=True))
        worst_rule = max(worst_rule, rule)
        rows.append((std, statistics.mean(taus), rule))
        for tau in FINE:
            worst_fine[tau] = max(worst_fine[tau], mean_grid[best] - statistics.mean(
                at_tau(c, tau * dl)[1] for c, dl in zip(curves, deltas, strict=True)))
        factors = [at_tau(c, t * dl)[0] / (t * dl * g)
                   for c, dl, g, t in zip(curves, deltas, scales, taus, strict=True)]
        guesses.append((std, min(factors), max(factors)))
    print("| worst | | " + " | ".join(f"{worst[t]:+.2f}" for t in TAUS) + " |")
    print("\nworst loss over the levels, finer: "
          + ", ".join(f"{t:.2f}: {worst_fine[t]:.2f}" for t in FINE))
    print("\nthe rule alpha.tau_for (tau from the relative noise delta / ||y||):")
    print("| std | mean tau | loss (dB) |\n|---:|---:|---:|")
    for std, tau, loss in rows:
        print(f"| {std:g} | {tau:.3f} | {loss:+.2f} |")
    print(f"worst {worst_rule:+.2f} dB")
    print("\nfirst guess factor alpha * R(x_bp) / (tau * delta * ||y||) at the rule's alpha:")
    print("| std | min | max |\n|---:|---:|---:|")
    for std, lo, hi in guesses:
        print(f"| {std:g} | {lo:.3f} | {hi:.3f} |")


if __name__ == "__main__":
    main()
