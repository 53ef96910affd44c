"""What does one `lbi sweep` cell of N digits cost per digit?

A dataset at the defaults: what one `lbi sweep` cell of N digits costs per digit.

    python -m benchmarks.studies.bench_sweep_dataset [--quick] [--threads T] [--large]

Times the whole command a user runs (start-up, data, noise, solves, metrics, CSV)::

    lbi sweep --network mnist-cnn-ae --alphas auto --regulariser auto --noise-stds 0.1 \\
              --samples 0-999 --threads T --out DIR

in a fresh process, and in this process, on a spread subset of the same digits: one
``lbi invert`` per digit as the sweep ran them before the batched cells (``api.prepare`` and
``api.iterate`` per sample, the path `_auto_alpha_metrics` still takes for per-sample
searches), with its solver seconds (what ``lbi invert`` reports as the solve), and the
decoder on all N codes. The per-digit cost of the sweep is then compared with the per-digit
wall time and solve time of single runs and with the decoder's, and its mean PSNR on the
subset with the single runs' (same digits, same noise). ``--large``: the 5,000 digits of
split ``all`` (the largest bundled set) instead of the 1,000 of ``val``. ``--quick``: 20
digits, 4 single runs (a smoke test). The machine is shared: the load average is printed;
compare ratios, not seconds, across runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _sweep_command(split: str, count: int, threads: int, out: Path) -> list[str]:
    return [sys.executable, "-m", "lbi_engine.cli", "sweep", "--network", "mnist-cnn-ae",
            "--alphas", "auto", "--regulariser", "auto", "--noise-stds", "0.1",
            "--split", split, "--samples", f"0-{count - 1}", "--threads", str(threads),
            "--out", str(out), "--quiet"]


def time_sweep(split: str, count: int, threads: int) -> dict[str, float]:
    """Wall and CPU seconds of the whole command, and its rows' mean PSNR per index."""
    import csv

    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "sweep"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(_sweep_command(split, count, threads, out), check=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(out / "results.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "rows": len(rows),
            "psnr": {int(r["index"]): float(r["psnr"]) for r in rows},  # type: ignore[dict-item]
            "decoder_psnr": sum(float(r["decoder_psnr"]) for r in rows) / len(rows),
            "iterations": sum(int(r["iterations"]) for r in rows) / len(rows)}


def time_singles(split: str, indices: list[int], threads: int) -> dict[str, float]:
    """One `lbi invert` per digit (prepare + solve + metrics), after a warm-up run."""
    import torch

    from lbi_engine import api
    from lbi_engine.experiments.sweep import SweepSpec
    from lbi_engine.models.zoo import load_network
    from lbi_engine.solvers import final

    torch.set_num_threads(threads)
    bundle = load_network("mnist-cnn-ae")
    spec = SweepSpec(network="mnist-cnn-ae", alphas=("auto",), noise_stds=(0.1,),
                     methods=("auto",), indices=tuple(indices), split=split,
                     regulariser="auto", steps="auto", threads=threads)
    request = spec.request(0.1, "auto", "auto")

    def one(index: int) -> dict:
        run = dataclasses.replace(request, index=index, seed=index)
        prepared = api.prepare(run, bundle)
        return api.final_metrics(prepared, final(api.iterate(prepared))).to_dict()

    one(indices[0])  # warm-up: norms, kernels, imports
    start = time.perf_counter()
    metrics = {i: one(i) for i in indices}
    wall = (time.perf_counter() - start) / len(indices)
    return {"wall": wall, "solve": sum(m["seconds"] for m in metrics.values()) / len(indices),
            "psnr": {i: m["psnr"] for i, m in metrics.items()}}  # type: ignore[dict-item]


def time_decoder(split: str, count: int) -> float:
    """Seconds for the decoder on ``count`` noisy codes (one batch)."""
    import numpy as np
    import torch

    from lbi_engine.experiments.batch import dataset_truths
    from lbi_engine.models.zoo import load_network
    from lbi_engine.noise import make_noisy_data

    bundle = load_network("mnist-cnn-ae")
    truths = dataset_truths("mnist", split, list(range(count))).astype(np.float32)
    x = torch.as_tensor(np.asarray(bundle.preprocessing.apply(
        truths.reshape(count, *bundle.encoder.input_shape))))
    codes = make_noisy_data(bundle.encoder, x, 0.1, sample_seeds=list(range(count))).y_delta
    bundle.decode(codes[:2])
    start = time.perf_counter()
    bundle.decode(codes)
    return time.perf_counter() - start


def run(quick: bool = False, threads: int = 2, large: bool = False) -> str:
    split, count = ("all", 5000) if large else ("val", 1000)
    count = 20 if quick else count
    singles = 4 if quick else 40
    subset = [i * count // singles for i in range(singles)]
    load = os.getloadavg()
    sweep = time_sweep(split, count, threads)
    one = time_singles(split, subset, threads)
    decoder = time_decoder(split, count)
    per_digit = sweep["wall"] / count
    mine = sum(sweep["psnr"][i] for i in subset) / len(subset)  # type: ignore[index]
    theirs = sum(one["psnr"][i] for i in subset) / len(subset)  # type: ignore[index]
    after = os.getloadavg()
    lines = [
        f"mnist-cnn-ae, alpha auto, regulariser auto, noise std 0.1, split {split}, "
        f"{count} digits, --threads {threads}; load average {load[0]:.2f} before, "
        f"{after[0]:.2f} after",
        "",
        "| measure | value |",
        "|---|---|",
        f"| whole `lbi sweep` command (start-up included) | {sweep['wall']:.1f} s wall, "
        f"{sweep['cpu']:.1f} s CPU |",
        f"| per digit in the sweep | {per_digit * 1e3:.1f} ms |",
        f"| one `lbi invert` per digit ({singles} digits, this process) | "
        f"{one['wall'] * 1e3:.1f} ms wall, of it {one['solve'] * 1e3:.1f} ms solve |",
        f"| sweep per digit / single run per digit | {per_digit / one['wall']:.3f} |",
        f"| sweep per digit / single run's solve | {per_digit / one['solve']:.3f} |",
        f"| decoder on all {count} codes | {decoder * 1e3:.1f} ms "
        f"({decoder / count * 1e6:.1f} us per digit) |",
        f"| sweep per digit / decoder per digit | {per_digit / (decoder / count):.0f} |",
        f"| mean PSNR, all {count} digits: sweep / decoder | "
        f"{sum(sweep['psnr'].values()) / count:.3f} / {sweep['decoder_psnr']:.3f} dB |",
        f"| mean PSNR on the {singles} single-run digits: sweep - single | "
        f"{mine - theirs:+.4f} dB |",
        f"| mean iterations per digit in the sweep | {sweep['iterations']:.1f} |",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 digits, 4 single runs")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--large", action="store_true", help="5,000 digits of split all")
    args = parser.parse_args()
    print(run(args.quick, args.threads, args.large))


if __name__ == "__main__":
    main()
