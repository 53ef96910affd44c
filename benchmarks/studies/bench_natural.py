"""On a network of natural images, do lbi's defaults match hand-written L-BFGS?

A zoo network at lbi's defaults against hand-written L-BFGS (default: natural-cnn-ae).

For each validation patch and noise level: lbi as a user runs it (``lbi_engine.api`` with the
request's defaults: regulariser ``auto``, auto α, method auto), TV at auto α for reference,
the trained decoder on the same noisy code, and ``torch.optim.LBFGS`` through the network on
1/2 ||E(x) - y||^2 + α TV_eps(x) (benchmarks/_hand_written.py) at every α of a grid, of which
the best grid α by mean PSNR is reported with its time to its final PSNR.

The patches (``PATCHES``) are validation patches (photographs astronaut and chelsea, never
seen in training) that no choice of this round looked at: the patches 3, 100 and 400 were used
to decide that ``auto`` takes the learned prior on this network and are left out here.

Usage::

    PYTHONPATH=. python -m benchmarks.studies.bench_natural [--quick] [--write]
    PYTHONPATH=. python -m benchmarks.studies.bench_natural --network mnist-cnn-ae --dataset mnist \
        --samples 15,215,415,615,815,995 --stds 0.01,0.05 --write

The second form checks the MNIST CNN at low noise on validation digits that no calibration
(alpha rules: 30/230/430/630/830, bench_input_prior's 60/160/...) and no other benchmark used.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from typing import Any

from benchmarks._common import load_average, threads, write_section
from benchmarks._hand_written import lbfgs_curve

NETWORK = "natural-cnn-ae"
PATCHES = (50, 150, 250, 350, 450, 550)
STDS = (0.05, 0.1)
ALPHAS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
MARK_START, MARK_END = "<!-- natural:start -->", "<!-- natural:end -->"


def _lbi(bundle: Any, index: int, std: float, regulariser: str, network: str = NETWORK,
         dataset: str = "natural") -> dict[str, Any]:
    from lbi_engine import api
    from lbi_engine.solvers import final

    request = api.InversionRequest(network=network, dataset=dataset, split="val", index=index,
                                   seed=index, noise_std=std, regulariser=regulariser)
    t0 = time.perf_counter()
    prepared = api.prepare(request, bundle)
    curve: list[tuple[float, float]] = []  # (solver seconds, PSNR) of every record shown

    def shown() -> Any:
        for record in api.iterate(prepared):
            if record.psnr is not None:
                curve.append((float(record.elapsed), float(record.psnr[0])))
            yield record

    metrics = api.final_metrics(prepared, final(shown())).to_dict()
    metrics["wall"] = time.perf_counter() - t0
    metrics["prepared"] = prepared
    metrics["curve"] = curve
    return metrics


def stays_above(curve: list[tuple[float, float]], level: float) -> float:
    """The solver time from which every later iterate shown (the α path's and the final
    solve's) has a PSNR of at least ``level``: what a user watching the live view waits
    for; infinite when the run ends below it."""
    since = math.inf
    for seconds, psnr in curve:
        if psnr < level:
            since = math.inf
        elif since == math.inf:
            since = seconds
    return since


def run(patches: tuple[int, ...], stds: tuple[float, ...], alphas: tuple[float, ...],
        network: str = NETWORK, dataset: str = "natural") -> list[str]:
    from lbi_engine.models.zoo import load_network

    bundle = load_network(network)
    _lbi(bundle, patches[0], stds[0], "tv", network, dataset)  # untimed: compilation aside
    lines = ["| σ | decoder (dB) | lbi defaults: prior, α | PSNR (dB) | time (s) | stop | "
             "TV at auto α (dB) | L-BFGS best grid α | PSNR (dB) | time (s) | "
             "lbi − L-BFGS (dB) | time lbi / L-BFGS | lbi stays ≥ L-BFGS − 0.5 dB from (s) | "
             "that / L-BFGS time |",
             "|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for std in stds:
        rows: list[dict[str, Any]] = []
        for index in patches:  # interleaved per patch: the machine's load falls on all alike
            d = _lbi(bundle, index, std, "auto", network, dataset)
            tv = _lbi(bundle, index, std, "tv", network, dataset)
            problem = d["prepared"].problem
            curves = {a: lbfgs_curve(problem.network, problem.y_delta, problem.x_true, a)
                      for a in alphas}
            rows.append({"d": d, "tv": tv["psnr"], "curves": curves})
            print(f"σ {std:g} patch {index}: lbi {d['psnr']:.2f} dB in {d['seconds']:.2f} s "
                  f"({d['alpha']:.3g}, {d.get('regulariser_run')}), TV {tv['psnr']:.2f}, "
                  f"decoder {d['decoder_psnr']:.2f}, L-BFGS "
                  + ", ".join(f"{a:g}: {c[-1][1]:.2f}" for a, c in curves.items()), flush=True)
        best = max(alphas, key=lambda a: statistics.mean(r["curves"][a][-1][1] for r in rows))
        mean = statistics.mean
        lb_psnr = mean(r["curves"][best][-1][1] for r in rows)
        lb_time = mean(r["curves"][best][-1][0] for r in rows)
        lbi_psnr = mean(r["d"]["psnr"] for r in rows)
        lbi_time = mean(r["d"]["seconds"] for r in rows)
        # per sample: the time from which lbi stays within 0.5 dB of L-BFGS's PSNR there
        reach = mean(stays_above(r["d"]["curve"], r["curves"][best][-1][1] - 0.5)
                     for r in rows)
        stops = sorted({r["d"]["stop_reason"] for r in rows})
        regs = sorted({str(r["d"].get("regulariser_run")) for r in rows})
        alpha_span = (min(r["d"]["alpha"] for r in rows), max(r["d"]["alpha"] for r in rows))
        lines.append(
            f"| {std:g} | {mean(r['d']['decoder_psnr'] for r in rows):.2f} | "
            f"{', '.join(regs)}, α {alpha_span[0]:.3g}–{alpha_span[1]:.3g} | {lbi_psnr:.2f} | "
            f"{lbi_time:.2f} | {', '.join(stops)} | {mean(r['tv'] for r in rows):.2f} | "
            f"{best:g} | {lb_psnr:.2f} | {lb_time:.2f} | {lbi_psnr - lb_psnr:+.2f} | "
            f"{lbi_time / lb_time:.2f} | {reach:.2f} | {reach / lb_time:.2f} |")
        print(lines[-1], flush=True)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two patches, one noise level")
    parser.add_argument("--write", action="store_true", help="write the table to RESULTS.md")
    parser.add_argument("--network", default=NETWORK)
    parser.add_argument("--dataset", default="natural")
    parser.add_argument("--samples", default=None, help="comma-separated validation indices")
    parser.add_argument("--stds", default=None, help="comma-separated noise stds")
    args = parser.parse_args(argv)
    patches = PATCHES[:2] if args.quick else PATCHES
    stds = STDS[:1] if args.quick else STDS
    if args.samples:
        patches = tuple(int(v) for v in args.samples.split(","))
    if args.stds:
        stds = tuple(float(v) for v in args.stds.split(","))
    alphas = ALPHAS[1:4] if args.quick else ALPHAS
    restore = threads(2)
    load = load_average()
    try:
        lines = run(patches, stds, alphas, args.network, args.dataset)
    finally:
        restore()
    natural = args.network == NETWORK
    start, end = (MARK_START, MARK_END) if natural else \
        (f"<!-- defaults-vs-lbfgs {args.network}:start -->",
         f"<!-- defaults-vs-lbfgs {args.network}:end -->")
    options = "".join(f" --{k} {v}" for k, v in (("network", args.network),
                                                 ("dataset", args.dataset),
                                                 ("samples", args.samples),
                                                 ("stds", args.stds)) if v and not natural)
    where = ("validation patches (photographs astronaut and chelsea, not used in training nor "
             "by any choice of this round)") if natural else \
        f"{args.dataset} validation samples that no calibration and no other benchmark used"
    text = "\n".join([
        start, f"## {args.network} at its defaults vs hand-written L-BFGS",
        "", "`PYTHONPATH=. python -m benchmarks.studies.bench_natural"
        f"{' --quick' if args.quick else ''}"
        f"{options} --write`; {where}: {list(patches)}, noise seed = sample index, "
        f"2 threads, load average {load} at the start. Times are solver seconds (lbi: the "
        "α search included; L-BFGS: to its final iterate at its best grid α, the grid "
        f"{list(alphas)} itself not counted). Means over the samples. \"time lbi / L-BFGS\" "
        "compares whole runs (lbi to its own stop); \"stays ≥ L-BFGS − 0.5 dB from\" is, per "
        "sample, the solver time from which every iterate lbi shows (α path and final solve) "
        "is within 0.5 dB of L-BFGS's final PSNR on that sample or above it (infinite when "
        "lbi's run ends below), the bar's reading of \"reaches ... in\".", "", *lines, "",
        end])
    print(text)
    if args.write:
        write_section(text, start, end)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
