"""``lbi sweep``: a resumable grid of inversions (thin layer over experiments.sweep)."""

from __future__ import annotations

import argparse
from typing import Any

from lbi_engine.cli import _common as c
from lbi_engine.settings.defaults import REQUEST_DEFAULTS as D

DESCRIPTION = """\
Run a grid of inversions: every combination of alpha x noise std x method, each on the same
samples of a bundled dataset. The samples of one grid cell are solved together in one batch;
alpha auto is chosen per sample. Every default is `lbi invert`'s (regulariser, method, alpha
auto, steps, stop rule), and sample INDEX gets the noise seed SEED + INDEX, so any row is
repeated alone, to the same numbers, with
  lbi invert --sample INDEX --seed SEED+INDEX --alpha A --noise-std S --method M ...

Written into --out DIR:
  results.csv      one row per (cell, sample): all parameters (incl. the network's sha256) and
                   the final metrics (psnr, ssim, decoder_psnr, objective, iterations, ...)
  psnr_vs_alpha.png, psnr_vs_noise.png, summary.md   mean PSNR per cell, the best cell per
                   noise std (alpha auto included; shown as a star at its mean chosen alpha)

Resumable: results.csv is rewritten atomically after every cell; running the same command
again skips the cells already in it (interrupt with Ctrl-C at any time). Extending the grid
runs only the new cells.

On several processes or machines (Dask distributed, pip install 'lbi[cluster]'): --workers N
starts a local cluster, --scheduler ADDRESS uses a running one; this process still writes
every row (docs/CLUSTER.md).
"""

EPILOG = """\
examples:
  # invert's defaults (alpha auto, regulariser and method auto) on 5 validation digits
  lbi sweep --network mnist-cnn-ae --alphas auto --samples 0-4 --out auto5
  # the paper's noise study (Sec. 5.2, Fig. 4-5) on 5 validation digits
  lbi sweep --network mnist-cnn-ae --methods joint --alphas log:1e-4:1e-2:5 \\
            --noise-stds 0.33,0.25,0.2,0.15,0.1,0.05,0.02,0.01,0 --out noise
  # compare methods on the perceptron autoencoder
  lbi sweep --network mnist-perceptron-ae --methods pdhg,landweber,backprop \\
            --alphas 1e-3,5e-3,5e-2 --noise-stds 0.05 --samples 0,100,200,300 --max-iter 2000 \\
            --out cmp
  # the same noise study on 2 local worker processes, one cell (and one thread) each
  lbi sweep --network mnist-cnn-ae --methods joint --alphas log:1e-4:1e-2:5 \\
            --noise-stds 0.1,0.05,0 --out noise --workers 2 --threads 1

lists: comma-separated values, a log grid log:START:STOP:COUNT (alphas, noise stds) or
an index range 0-4 (samples).
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("sweep", help="a resumable grid over alpha x noise x method x "
                              "samples, with a CSV and PSNR plots",
                              description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=c.HelpFormatter)
    p.add_argument("--network", required=True, metavar="NAME|PATH",
                   help="zoo name or model file (as for lbi invert)")
    p.add_argument("--input-shape", type=c.shape, metavar="C,H,W",
                   help="input shape when the model file does not record it")
    p.add_argument("--allow-code", "--allow-pickle", dest="allow_code", action="store_true",
                   help="consent, for this run, to open a model format whose loading runs code "
                        "from the file (TorchScript, a pickled nn.Module); trusted files only")
    p.add_argument("--alphas", type=_alphas, default=[D["alpha"]], metavar="LIST",
                   help="regularisation weights, e.g. 1e-3,1e-2 or log:1e-4:1e-2:5; auto "
                        "(alone or in the list): chosen per sample as `lbi invert` does")
    p.add_argument("--noise-stds", type=c.float_list, default=[D["noise_std"]], metavar="LIST",
                   help="noise stds on the network output")
    p.add_argument("--methods", "--method", type=_methods, default=[D["method"]],
                   metavar="LIST", help="comma-separated; " + c.METHOD_HELP)
    p.add_argument("--samples", type=c.int_list, default=[0, 200, 400, 600, 800],
                   metavar="LIST",
                   help="sample indices, e.g. 0-4 or 0,3,7; the MNIST splits are sorted by "
                        "label, so the default picks the digits 0, 2, 4, 6, 8 of val")
    p.add_argument("--dataset", choices=("mnist", "natural", "cartoon"), default=D["dataset"])
    p.add_argument("--split", default=D["split"],
                   help="mnist: train|val|all; cartoon: a family")
    p.add_argument("--seed", type=c.nonnegative_int, default=D["seed"],
                   help="base noise seed (sample INDEX uses SEED + INDEX)")
    p.add_argument("--regulariser", default=D["regulariser"], metavar="R",
                   help=c.REGULARISER_HELP)
    p.add_argument("--steps", choices=c.STEP_RULES, default=D["steps"],
                   help="step-size rule")
    p.add_argument("--max-iter", type=c.positive_int, default=D["max_iter"], metavar="N")
    p.add_argument("--tol", type=c.nonnegative_float, default=D["tol"], metavar="T",
                   help=c.TOL_HELP)
    p.add_argument("--tol-mode", choices=c.TOL_MODES, default=D["tol_mode"])
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default=D["device"],
                   help="auto: CUDA when torch finds a GPU, else the CPU")
    p.add_argument("--dtype", choices=("float32", "float64"), default=D["dtype"])
    p.add_argument("--threads", type=c.positive_int, default=1, metavar="N",
                   help="torch CPU threads (per cell with --workers/--scheduler; 1 is "
                        "fastest for these sizes on a busy machine)")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (resumed if it "
                   "holds a results.csv)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print only problems: errors and warnings, no progress line and no "
                        "summary")
    c.add_memory_limit(p)
    _add_cluster_arguments(p)
    p.set_defaults(handler=run)
    return p


#: Most inversions one sweep may ask for (cells x samples): more is a typo in a grid.
MAX_SOLVES = 100_000


def _add_cluster_arguments(p: argparse.ArgumentParser) -> None:
    """--workers / --scheduler: the cells run as Dask tasks (docs/CLUSTER.md)."""
    g = p.add_argument_group("cluster (Dask distributed; pip install 'lbi[cluster]')")
    where = g.add_mutually_exclusive_group()
    where.add_argument("--workers", type=c.positive_int, metavar="N",
                       help="start a local Dask cluster of N worker processes here; each "
                            "runs one cell at a time with --threads torch threads")
    where.add_argument("--scheduler", metavar="ADDRESS",
                       help="send the cells to a running Dask scheduler: tcp://HOST:PORT or "
                            "a scheduler file (dask scheduler --scheduler-file FILE)")
    g.add_argument("--connect-timeout", type=c.positive_float, metavar="SECONDS",
                   default=None,
                   help="seconds to reach the --scheduler, Dask handshake included "
                        "(default 10)")
    g.add_argument("--oversubscribe", action="store_true",
                   help="allow workers x threads to exceed the cores (refused otherwise)")


def _cluster(args: argparse.Namespace) -> Any:
    """ClusterOptions when --workers/--scheduler is given (checked before any work), or None."""
    if args.workers is None and args.scheduler is None:
        return None
    from lbi_engine.experiments.sweep_dask import (
        ClusterOptions,
        check_local_cores,
        require_distributed,
        scheduler_address,
    )

    require_distributed()
    # a scheduler file is read (and checked) once, here, before any work
    scheduler = None if args.scheduler is None else scheduler_address(args.scheduler)
    options = ClusterOptions(scheduler=scheduler, workers=args.workers,
                             threads=args.threads, oversubscribe=args.oversubscribe,
                             connect_timeout=args.connect_timeout,
                             memory_limit=args.memory_limit)
    check_local_cores(options)
    return options


def _alphas(text: str) -> list[float | str]:
    """A list of alphas (c.float_list syntax) in which "auto" may appear, alone or not:
    cells keyed "auto" choose alpha per sample (their rows record it in alpha_chosen)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    auto = [p for p in parts if p.lower() == "auto"]
    rest = ",".join(p for p in parts if p.lower() != "auto")
    values: list[float | str] = list(c.float_list(rest)) if rest else []
    return values + (["auto"] if auto else [])


def _methods(text: str) -> list[str]:
    names = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in names if m not in c.METHOD_NAMES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: methods are {', '.join(c.METHOD_NAMES)}")
    return list(dict.fromkeys(names))


def run(args: argparse.Namespace) -> int:
    from lbi_engine.cli._progress import live_line
    from lbi_engine.experiments.batch import torch_threads
    from lbi_engine.experiments.sweep import SweepSpec, run_sweep
    from lbi_engine.results.folder_lock import output_folder_lock, prepare_output_folder
    from lbi_engine.results.progress import CountProgress

    cluster = _cluster(args)  # no Dask, or too many threads: refused before anything else
    out = prepare_output_folder(args.out)
    cells = len(args.alphas) * len(args.noise_stds) * len(args.methods)
    if cells * len(args.samples) > MAX_SOLVES:  # refused before any list of cells exists
        raise c.UsageError(
            f"the grid has {cells:,} cells x {len(args.samples):,} samples = "
            f"{cells * len(args.samples):,} inversions, more than {MAX_SOLVES:,}; give fewer "
            "alphas, noise stds, methods or samples", "lbi sweep")
    spec = SweepSpec(
        network=args.network, alphas=tuple(args.alphas), noise_stds=tuple(args.noise_stds),
        methods=tuple(args.methods), indices=tuple(args.samples), dataset=args.dataset,
        split=args.split, seed=args.seed, regulariser=args.regulariser, steps=args.steps,
        max_iter=args.max_iter, tol=args.tol, tol_mode=args.tol_mode,
        input_shape=args.input_shape, device=args.device, dtype=args.dtype,
        allow_pickle=args.allow_code, threads=args.threads,
    )
    if args.allow_code:
        c.warn("--allow-code: the model file may be loaded by running code stored in it "
               "(TorchScript, pickle); use it only for files you trust")
    total = len(spec.cells())
    count = CountProgress(total)
    with live_line(count.text, args.quiet) as redraw:
        def progress(done: int, _total: int, text: str) -> None:
            count.update(done, text)
            redraw()

        with torch_threads(args.threads), output_folder_lock(out):
            result = run_sweep(spec, out, progress, cluster=cluster)
    if not args.quiet:
        print(f"sweep: {total} cell(s) x {len(spec.indices)} sample(s): ran {result.ran}, "
              f"skipped {result.skipped} already in {c.shown(result.csv_path)}")
        print(f"  wrote {', '.join(c.shown(f) for f in result.files)}")
        _print_best(spec, result.rows)
    return c.EXIT_OK


def _print_best(spec: Any, rows: Any) -> None:
    """The best cell of each noise std (of all cells, alpha auto included)."""
    from lbi_engine.experiments.sweep_summary import aggregate, alpha_words, best_cells

    stats = aggregate(rows)
    for std in spec.noise_stds:
        best = best_cells(stats, None, std)
        if best is not None:
            (method, _, alpha), values = best
            print(f"  best at noise std {std:g}: {method}, alpha {alpha_words(alpha, values)}: "
                  f"mean PSNR {values['psnr']:.2f} dB")
