"""How many solver steps does alpha "auto"'s search take, by noise level?

Steps of a default run (alpha "auto") on training digits: the alpha search's cost by count.

``PYTHONPATH=. python -m benchmarks.studies.alpha_search_steps [--network NAME] [--digits 3,70,...]
[--stds 0.05,0.01] [--regulariser tv] [--guess G] [--slope S] [--creep-ratio Q]``

Iteration counts do not depend on the machine's load, so this is how the search's constants
(``alpha.GUESS``, the settle test) were compared; times are in bench_multilayer's table.
Prints per noise level the mean PSNR, solver steps (every solve of the path and the final one,
``choice.solver_steps``), solves of the
search, and the stop reasons. ``--guess``, ``--slope`` and ``--creep-ratio`` override
``alpha.GUESS`` (and ``alpha.GUESS_BOX``, a boxed prior's), ``alpha.SLOPE`` and
``alpha.CREEP_RATIO`` for the run.
"""

from __future__ import annotations

import argparse
import statistics

import torch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--network", default="mnist-cnn-ae")
    parser.add_argument("--digits", default="3,70,140,210,280,350")
    parser.add_argument("--stds", default="0.05,0.01")
    parser.add_argument("--regulariser", default="tv")
    parser.add_argument("--guess", type=float, default=None)
    parser.add_argument("--slope", type=float, default=None)
    parser.add_argument("--creep-ratio", type=float, default=None,
                        help="override alpha.CREEP_RATIO (inf: no creep test in the settle rule)")
    args = parser.parse_args()
    from lbi_engine.api import InversionRequest, iterate, prepare
    from lbi_engine.models.zoo import load_zoo
    from lbi_engine.solvers.alpha import path_solve, residual_path
    from lbi_engine.solvers.alpha import target as alpha

    if args.guess is not None:
        alpha.GUESS = alpha.GUESS_BOX = args.guess
    if args.slope is not None:
        residual_path.SLOPE = args.slope  # _local_slope reads it there
    if args.creep_ratio is not None:
        path_solve.CREEP_RATIO = args.creep_ratio  # _Settled reads it there
    torch.set_num_threads(1)
    bundle = load_zoo(args.network)
    print(f"{args.network} {args.regulariser}, training digits {args.digits}, "
          f"GUESS {alpha.GUESS:g} / GUESS_BOX {alpha.GUESS_BOX:g}, "
          f"SLOPE {residual_path.SLOPE:g}")
    print("| std | mean PSNR (dB) | mean steps | mean solves of the search | stops |")
    print("|---:|---:|---:|---:|---|")
    for std in (float(s) for s in args.stds.split(",")):
        psnr, steps, solves, stops = [], [], [], set()
        for digit in (int(d) for d in args.digits.split(",")):
            request = InversionRequest(network=args.network, regulariser=args.regulariser,
                                       split="train", index=digit,
                                       noise_std=std)
            from lbi_engine.solvers import final

            last = final(iterate(prepare(request, bundle)))
            psnr.append(float(last.psnr[0]))
            steps.append(last.choice.solver_steps)
            solves.append(len(last.choice.path))
            stops.add(last.stop_reasons[0])
        print(f"| {std:g} | {statistics.mean(psnr):.2f} | {statistics.mean(steps):.0f} | "
              f"{statistics.mean(solves):.1f} | {', '.join(sorted(stops))} |", flush=True)


if __name__ == "__main__":
    main()
