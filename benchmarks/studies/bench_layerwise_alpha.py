"""Which input-stage alpha rule should the layer-wise method use?

Layer-wise input-stage alpha against a grid: ``PYTHONPATH=. python -m
benchmarks.studies.bench_layerwise_alpha [--stds 0.01,0.02,0.05,0.1,0.33]
[--digits 0,200,400,600,800]``.

For each noise std, on ``mnist-cnn-ae`` with the shipped feature prior: the mean PSNR over
the validation digits (those of ``lbi reproduce noise``; sample i's noise uses seed i) of
``lbi invert --method layerwise`` at its default input-stage rule (quasi-optimality), with
``input_alpha="discrepancy"``, and at each input-stage alpha of a grid (1 down to 0.01, four
per decade, ``input_alpha="given"``). Prints one Markdown table; nothing is written.
"""

from __future__ import annotations

import argparse
import time

GRID = tuple(10 ** (-0.25 * k) for k in range(9))


def _run(base: dict, **extra: object) -> dict:
    from lbi_engine import api
    from lbi_engine.solvers import final

    prepared = api.prepare(api.InversionRequest(**base, **extra))
    return api.final_metrics(prepared, final(api.iterate(prepared))).to_dict()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stds", default="0.01,0.02,0.05,0.1,0.33")
    ap.add_argument("--digits", default="0,200,400,600,800")
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    digits = [int(d) for d in a.digits.split(",")]
    started = time.perf_counter()
    print("| noise std | best grid α | PSNR at best grid α | quasi-optimality: α (geo. mean) | "
          "PSNR | loss | discrepancy: α (geo. mean) | PSNR | loss |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for std in (float(s) for s in a.stds.split(",")):
        grid = {alpha: [] for alpha in GRID}
        rules: dict[str, list[dict]] = {"quasi-optimality": [], "discrepancy": []}
        for index in digits:
            base = dict(network="mnist-cnn-ae", regulariser="tv", dataset="mnist", split="val",
                        index=index,
                        seed=index, noise_std=std, method="layerwise")
            for rule, runs in rules.items():
                runs.append(_run(base, options={"input_alpha": rule}))
            for alpha in GRID:
                grid[alpha].append(_run(base, alpha=alpha,
                                        options={"input_alpha": "given"})["psnr"])
        means = {alpha: sum(v) / len(v) for alpha, v in grid.items()}
        best = max(means, key=means.__getitem__)
        cells = [f"{std:g}", f"{best:.3g}", f"{means[best]:.2f}"]
        for runs in rules.values():
            psnr = sum(m["psnr"] for m in runs) / len(runs)
            alpha = torch.tensor([m["alpha"] for m in runs]).log().mean().exp().item()
            cells += [f"{alpha:.3g}", f"{psnr:.2f}", f"{means[best] - psnr:+.2f}"]
        print("| " + " | ".join(cells) + " |", flush=True)
    print(f"\nDigits (validation): {a.digits}; {time.perf_counter() - started:.0f} s, one thread.")


if __name__ == "__main__":
    main()
