"""Does TV on top of the learned Gaussian input prior help, and at which weight?

The learned Gaussian input prior with and without TV on the CNN autoencoder:
``PYTHONPATH=. python -m benchmarks.studies.bench_gaussian_tv [--calibrate]``.

Runs as a user does (``lbi invert --network mnist-cnn-ae --sample I --seed I --noise-std S
--regulariser R``, alpha auto = the Gaussian's noise-scaled rule for the whole R, method auto =
joint, float32, one thread), interleaved per digit so that the machine's load falls on both
columns alike. Default: ``gaussian+box`` against ``gaussian+tv+box`` (gamma
``DEFAULT_TV_WEIGHT``) on the validation digits REPORT_DIGITS of ``bench_input_prior`` at
sigma 0.1 and 0.33: mean PSNR, wins, mean solver time (result.json's ``seconds``).
``--calibrate``: the grid of gamma on TRAINING digits (CALIBRATION_TRAIN, one per class; the
validation digits are the benchmark's) from which ``DEFAULT_TV_WEIGHT`` was chosen
(docs/MATH.md §4.3). Prints its table; ``--write`` (the default mode only) also replaces this
benchmark's own section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from benchmarks._common import write_section
from benchmarks.studies.bench_input_prior import REPORT_DIGITS, _mean, _run

CALIBRATION_TRAIN = tuple(400 * c + 20 for c in range(10))  # training split, classes 0-9
STDS = (0.1, 0.33)
GAMMAS = (0.0, 0.1, 0.3, 1.0, 3.0, 10.0)
MARK_START = "<!-- gaussian-tv:begin -->"
MARK_END = "<!-- gaussian-tv:end -->"


def _spec(gamma: float) -> str:
    return "gaussian+box" if gamma == 0 else f"gaussian+tv={gamma:g}+box"


def calibrate(bundle: Any) -> list[str]:
    lines = ["| σ | " + " | ".join(f"γ = {g:g}" for g in GAMMAS) + " |",
             "|---" * (len(GAMMAS) + 1) + "|"]
    for std in STDS:
        psnr: dict[float, list[float]] = {g: [] for g in GAMMAS}
        for index in CALIBRATION_TRAIN:
            for g in GAMMAS:
                psnr[g].append(_run(bundle, index, std, _spec(g), split="train")["psnr"])
            print(json.dumps({"std": std, "digit": index,
                              "psnr": {g: round(v[-1], 3) for g, v in psnr.items()}}),
                  flush=True)
        lines.append(f"| {std:g} | " + " | ".join(f"{_mean(psnr[g]):.2f}" for g in GAMMAS)
                     + " |")
    return lines


def report(bundle: Any) -> list[str]:
    regs = ("gaussian+box", "gaussian+tv+box")
    lines = ["| σ | decoder | Gaussian + box: PSNR (wins vs decoder), time | "
             "Gaussian + TV + box: PSNR (wins), time | PSNR difference per digit |",
             "|---|---|---|---|---|"]
    for std in STDS:
        rows = []
        for index in REPORT_DIGITS:
            row: dict[str, Any] = {"digit": index}
            for reg in regs:
                m = _run(bundle, index, std, reg)
                row[reg] = (m["psnr"], m["seconds"])
                row["decoder"] = m["decoder_psnr"]
            rows.append(row)
            print(json.dumps({"std": std, **row}), flush=True)
        cells = []
        for reg in regs:
            psnr = _mean([r[reg][0] for r in rows])
            wins = sum(r[reg][0] > r["decoder"] for r in rows)
            secs = _mean([r[reg][1] for r in rows])
            cells.append(f"{psnr:.2f} ({wins}/{len(rows)}), {secs:.3f} s")
        diffs = ", ".join(f"{r[regs[1]][0] - r[regs[0]][0]:+.2f}" for r in rows)
        lines.append(f"| {std:g} | {_mean([r['decoder'] for r in rows]):.2f} | "
                     + " | ".join(cells) + f" | {diffs} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calibrate", action="store_true",
                        help="the grid of gamma on training digits instead")
    parser.add_argument("--write", action="store_true",
                        help="update this benchmark's section of benchmarks/RESULTS.md")
    args = parser.parse_args()
    import torch

    from lbi_engine.models.zoo import load_network

    torch.set_num_threads(1)
    bundle = load_network("mnist-cnn-ae")
    for reg in ("gaussian+box", "gaussian+tv+box"):  # untimed: kernels load on first use
        _run(bundle, REPORT_DIGITS[0], 0.05, reg, alpha=0.01)
    if args.calibrate:
        print("\n".join(calibrate(bundle)))
        return
    start = time.perf_counter()
    lines = report(bundle)
    text = "\n".join([
        MARK_START,
        "## Learned Gaussian input prior with and without TV (mnist-cnn-ae)",
        "",
        f"`PYTHONPATH=. python -m benchmarks.studies.bench_gaussian_tv --write` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
        f"({time.perf_counter() - start:.0f} s, one thread, float32, a shared 2-core machine: "
        "times are ratios within this run). Validation digits "
        f"{', '.join(map(str, REPORT_DIGITS))} (seed = index); gamma = 1 (the default, chosen "
        "on training digits: `--calibrate`); alpha auto = c(s) s^2 for both; mean PSNR in dB, "
        "wins against the decoder, mean solver time per run.",
        "",
        *lines,
        MARK_END,
    ])
    if args.write:
        write_section(text, MARK_START, MARK_END)
    print(text)


if __name__ == "__main__":
    main()
