"""``lbi reproduce EXPERIMENT``: the paper's figures and tables, recomputed."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from lbi_engine.cli import _common as c
from lbi_engine.io import atomic_write_text, safe_output_path

DESCRIPTION = """\
Recompute an experiment of the paper. Each writes a folder with PNG figures and report.md:
the numbers it computed (never typed in; the paper's values only in columns marked "paper"),
the parameters, the run time, and an `lbi invert`/`lbi sweep` line that repeats a single run.
All run on the CPU in minutes; --quick runs a reduced version in seconds (for smoke tests;
its numbers are not the paper's setting).

experiments (MATH.md Sec. 9 has the exact specifications and the paper's ambiguities):
  circle            64x64 disc, random ReLU perceptron (circle-perceptron), noise std 0.005:
                    Landweber + discrepancy principle vs TV (alpha 1.5e-2); l2 and TV table
  mnist-perceptron  perceptron autoencoder: 5 train (alpha 5e-3) + 5 val (alpha 5e-2) digits:
                    ground truth, decoder, inversion, PSNRs
  mnist-cnn         convolutional autoencoder, joint method, alpha 9e-3, <= 1500 iterations
  noise             noise std on the code 0.33 .. 0: PSNR of the decoder, of the inversion at
                    the best alpha of a wide grid (0.56 .. 1e-4) and at alpha auto; delta^2
  natural           the noise study on 32x32 colour photograph patches (natural-res-ae, a
                    residual autoencoder; validation photographs astronaut and chelsea), noise
                    std 0.1 .. 0.02: decoder vs TV (best grid alpha, alpha auto) vs the learned
                    Gaussian prior + box
  convergence       a-priori rule alpha(delta), TV prior with an exact source condition:
                    symmetric Bregman distance against delta (log-log, O(delta)), fitted slope
  all               every experiment, each in its own subfolder of --out, plus index.md
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    from lbi_engine.experiments import EXPERIMENTS

    p = subparsers.add_parser("reproduce", help="recompute a figure/table of the paper "
                              "(circle, mnist-perceptron, mnist-cnn, noise, natural, convergence, "
                              "all)",
                              description=DESCRIPTION, formatter_class=c.HelpFormatter,
                              epilog="example: lbi reproduce circle --out paper/circle")
    p.add_argument("experiment", choices=(*EXPERIMENTS, "all"), metavar="EXPERIMENT",
                   help="one of: " + ", ".join((*EXPERIMENTS, "all")))
    p.add_argument("--out", metavar="DIR",
                   help="output folder (default: reproduce-EXPERIMENT in the current folder)")
    p.add_argument("--quick", action="store_true",
                   help="reduced sizes and iterations: finishes in seconds")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the files of an earlier reproduction in DIR")
    p.add_argument("--threads", type=c.positive_int, default=1, metavar="N",
                   help="torch CPU threads; the problems are small, and on a busy 2-core "
                        "machine 2 threads were measured up to 10x slower than 1")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary on stdout")
    p.set_defaults(handler=run)
    return p


def run(args: argparse.Namespace) -> int:
    from lbi_engine.experiments import EXPERIMENTS
    from lbi_engine.experiments.batch import torch_threads

    names = list(EXPERIMENTS) if args.experiment == "all" else [args.experiment]
    from lbi_engine.results.folder_lock import output_folder_lock, prepare_output_folder
    from lbi_engine.results.owned_folders import derived_folder, owned_folder

    base = prepare_output_folder(args.out or f"reproduce-{args.experiment}")
    if args.experiment == "all":  # refuse an existing index before hours of work
        safe_output_path(base / "index.md", args.overwrite)
    lines = []
    with output_folder_lock(base), torch_threads(args.threads):
        # every folder made under --out, checked (no link, the user's own) before any work
        folders = {name: derived_folder(base, name) if args.experiment == "all"
                   else owned_folder(base) for name in names}
        for name in names:
            out = folders[name]
            seconds = _run_one(name, out, args)
            lines.append(f"| [{name}]({name}/report.md) | {EXPERIMENTS[name][2]} | "
                         f"{seconds:.1f} s |")
    if args.experiment == "all":
        mode = " (--quick)" if args.quick else ""
        atomic_write_text(base / "index.md", f"# lbi reproduce all{mode}\n\n"
                          "| experiment | what | run time |\n|---|---|---|\n"
                          + "\n".join(lines) + "\n")
    return c.EXIT_OK


def _run_one(name: str, out: Path, args: argparse.Namespace) -> float:
    from lbi_engine.experiments import get_experiment

    experiment = get_experiment(name)
    started = time.perf_counter()
    with c.progress_bar(None, name, unit="step") as bar:
        def progress(text: str) -> None:
            bar.set_postfix_str(text, refresh=False)
            bar.update(1)

        report = experiment(out, quick=args.quick, overwrite=args.overwrite, progress=progress)
    seconds = time.perf_counter() - started
    if not args.quiet:
        print(f"{name}: {seconds:.1f} s -> {c.shown(out / 'report.md')} "
              f"({len(report.figures)} figure(s))")
    return seconds
