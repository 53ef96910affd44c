"""Does the learned Gaussian input prior beat the decoder and TV, at which alpha?

The learned Gaussian input prior against the decoder and TV on the CNN autoencoder:
``PYTHONPATH=. python -m benchmarks.studies.bench_input_prior [--calibrate] [--write]``.

Per code-noise std (0.01, 0.05, 0.1, 0.33) and validation digit, runs as a user does
(``lbi invert --network mnist-cnn-ae --split val --sample I --seed I --noise-std S
--regulariser R``, alpha auto, method auto = joint, float32, one thread): the decoder D(y^δ),
TV and TV + box [0, 1] (alpha by the discrepancy search), and Gaussian + box (alpha by its
noise-scaled rule, ``GaussianPrior.alpha_for_noise``), plus Gaussian + box at the best alpha of
the grid c s^2, c in {1/16, 1/8, 1/4, 1/2, 1} (the rule's oracle). PSNR is against the clean
digit; time is the solver time of result.json (``seconds``: the alpha path and the final solve).

Digits: REPORT_DIGITS (validation split; not used by the prior, which is fitted on the
training split, nor by the rule's calibration, nor by ``lbi reproduce noise`` (0, 200, ..)
nor by ``bench_multilayer`` (5, 105, ..)). ``--calibrate`` runs the grid on CALIBRATION_DIGITS
(validation, disjoint from REPORT_DIGITS) and prints the table the rule's constants come from
(``regularisers/_gaussian.py``, docs/MATH.md §4.3). ``--write`` replaces this benchmark's
section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import Any

from benchmarks._common import write_section

REPORT_DIGITS = (60, 160, 360, 560, 760, 960)  # classes 0, 1, 3, 5, 7, 9
CALIBRATION_DIGITS = (30, 230, 430, 630, 830)  # classes 0, 2, 4, 6, 8
STDS = (0.01, 0.05, 0.1, 0.33)
FACTORS = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0)
DEFAULTS = ("tv", "tv+box", "gaussian+box")
MARK_START = "<!-- input-prior:begin -->"
MARK_END = "<!-- input-prior:end -->"


def _run(bundle: Any, index: int, std: float, reg: str, alpha: float | str = "auto",
         rule: str = "auto", split: str = "val") -> dict[str, Any]:
    from lbi_engine import api
    from lbi_engine.solvers import final

    request = api.InversionRequest(network="mnist-cnn-ae", dataset="mnist", split=split,
                                   index=index, seed=index, noise_std=std, regulariser=reg,
                                   alpha=alpha, alpha_rule=rule)
    prepared = api.prepare(request, bundle)
    return api.final_metrics(prepared, final(api.iterate(prepared))).to_dict()


def _grid(bundle: Any, index: int, std: float) -> dict[float, float]:
    return {c: _run(bundle, index, std, "gaussian+box", c * std * std)["psnr"] for c in FACTORS}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def calibrate(bundle: Any) -> list[str]:
    lines = ["| σ | " + " | ".join(f"c = {c:g}" for c in FACTORS)
             + " | best c | discrepancy principle |", "|---|" + "---|" * (len(FACTORS) + 2)]
    for std in STDS:
        grids = [_grid(bundle, i, std) for i in CALIBRATION_DIGITS]
        means = {c: _mean([g[c] for g in grids]) for c in FACTORS}
        best = max(means, key=lambda c: means[c])
        morozov = _mean([_run(bundle, i, std, "gaussian+box", rule="discrepancy")["psnr"]
                         for i in CALIBRATION_DIGITS])
        lines.append(f"| {std:g} | " + " | ".join(f"{means[c]:.2f}" for c in FACTORS)
                     + f" | {best:g} | {morozov:.2f} |")
        print(lines[-1], flush=True)
    return lines


def report(bundle: Any) -> tuple[list[str], list[dict[str, Any]]]:
    rows: list[dict[str, Any]] = []
    for std in STDS:
        for index in REPORT_DIGITS:
            row: dict[str, Any] = {"std": std, "digit": index}
            # interleaved per digit, so that the machine's load falls on every column alike
            for reg in DEFAULTS:
                m = _run(bundle, index, std, reg)
                row[reg] = (m["psnr"], m["seconds"], m["alpha"])
                row["decoder"] = m["decoder_psnr"]
            grid = _grid(bundle, index, std)
            row["grid"] = grid
            rows.append(row)
            print(json.dumps(row), flush=True)
    lines = [
        "| σ | decoder | TV (auto) | TV + box (auto) | Gaussian + box (auto) | Gaussian + box, "
        "best grid c | wins vs decoder (TV+box / Gaussian+box) | time TV+box / TV | "
        "time Gaussian+box / TV |",
        "|---|---|---|---|---|---|---|---|---|"]
    for std in STDS:
        rs = [r for r in rows if r["std"] == std]
        dec = _mean([r["decoder"] for r in rs])
        psnr = {reg: _mean([r[reg][0] for r in rs]) for reg in DEFAULTS}
        secs = {reg: _mean([r[reg][1] for r in rs]) for reg in DEFAULTS}
        means = {c: _mean([r["grid"][c] for r in rs]) for c in FACTORS}
        best = max(means, key=lambda c: means[c])
        wins = {reg: sum(r[reg][0] > r["decoder"] for r in rs) for reg in DEFAULTS}
        lines.append(
            f"| {std:g} | {dec:.2f} | {psnr['tv']:.2f} | {psnr['tv+box']:.2f} | "
            f"{psnr['gaussian+box']:.2f} | {means[best]:.2f} (c = {best:g}) | "
            f"{wins['tv+box']}/{len(rs)} / {wins['gaussian+box']}/{len(rs)} | "
            f"{secs['tv+box'] / secs['tv']:.2f} | {secs['gaussian+box'] / secs['tv']:.2f} |")
    return lines, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calibrate", action="store_true",
                        help="the rule's calibration table on CALIBRATION_DIGITS instead")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    import torch

    from lbi_engine.models.zoo import load_network

    torch.set_num_threads(1)
    bundle = load_network("mnist-cnn-ae")
    # untimed first runs: the compiled kernels load (or compile) on a process's first run of
    # each regulariser, which would otherwise fall on the first cell's time only
    for reg in DEFAULTS:
        _run(bundle, REPORT_DIGITS[0], 0.05, reg, alpha=0.01)
    start = time.perf_counter()
    if args.calibrate:
        print("\n".join(calibrate(bundle)))
        return
    lines, rows = report(bundle)
    secs = {reg: _mean([r[reg][1] for r in rows]) for reg in DEFAULTS}
    geo = {reg: math.exp(_mean([math.log(r[reg][1]) for r in rows])) for reg in DEFAULTS}
    text = "\n".join([
        MARK_START,
        "## Learned Gaussian input prior against the decoder and TV (mnist-cnn-ae)",
        "",
        f"`PYTHONPATH=. python -m benchmarks.studies.bench_input_prior --write` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
        f"({time.perf_counter() - start:.0f} s, "
        "one thread, float32, a shared 2-core machine: times are ratios within this run). "
        f"Validation digits {', '.join(map(str, REPORT_DIGITS))} (seed = index), used by no "
        "calibration; the prior is fitted on the training split (`lbi prior mnist-cnn-ae`). "
        "Mean PSNR in dB over the digits; every run at the defaults (alpha auto, method joint); "
        "Gaussian + box's alpha by its rule c(s) s^2, and, as the rule's oracle, the best c of "
        "the grid 1/16 .. 1 (mean over the digits).",
        "",
        *lines,
        "",
        f"Mean solver time per run over all cells: TV {secs['tv']:.3f} s, TV + box "
        f"{secs['tv+box']:.3f} s, Gaussian + box {secs['gaussian+box']:.3f} s (geometric means "
        f"{geo['tv']:.3f} / {geo['tv+box']:.3f} / {geo['gaussian+box']:.3f} s).",
        MARK_END,
    ])
    if args.write:
        write_section(text, MARK_START, MARK_END)
    print(text)


if __name__ == "__main__":
    main()
