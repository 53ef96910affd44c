"""What does one evaluation of the continuation path cost through lbi's translation of a
network file (``LiftedNetwork.reference``, max-pools pooled) against the lifted layers (the
max-pools' exact ReLU rewrite)? One forward and backward of ||N(x)||^2 at 64 x 64 on the
held-out evaluation's calibration-half networks (random weights), one torch thread; the
median of 21 after one warm-up, the two timed alternately in the same process.

    OMP_NUM_THREADS=1 PYTHONPATH=. python -m benchmarks.studies.path_forward_cost [--arch A,B]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.heldout import design, measure, nets


def _median_seconds(forwards: list[Callable[[torch.Tensor], torch.Tensor]], x: torch.Tensor,
                    repeats: int = 21) -> list[float]:
    """The median seconds of each forward, timed alternately so that a burst of load on the
    shared machine falls on both alike."""
    def once(forward: Callable[[torch.Tensor], torch.Tensor]) -> float:
        x.grad = None
        start = time.perf_counter()
        forward(x).square().sum().backward()
        return time.perf_counter() - start

    times: list[list[float]] = [[] for _ in forwards]
    for k in range(repeats + 1):
        for forward, kept in zip(forwards, times, strict=True):
            seconds = once(forward)
            if k:  # the first round warms up
                kept.append(seconds)
    return [sorted(t)[repeats // 2] for t in times]


def main(argv: list[str] | None = None) -> int:
    from lbi_engine import api
    from lbi_engine.request import InversionRequest

    parser = argparse.ArgumentParser(prog="python -m benchmarks.studies.path_forward_cost")
    parser.add_argument("--arch", default="", help="comma-separated architectures (default all)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print("| network | max-pools rewritten | lifted layers (ms) | translation (ms) | "
          "lifted / translation |")
    print("|---|---|---|---|---|")
    for arch in [a for a in args.arch.split(",") if a] or list(design.ARCHS):
        case = next(c for c in design.cases("calibrate", [arch])
                    if c.side == design.SIDE and c.weights == "random")
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            network = measure.export(measure.module_for(case),
                                     folder / f"net.{nets.arch(arch).fmt}", case.side)
            image = design.write_png(case.photo, case.side, folder)
            prepared = api.prepare(InversionRequest(network=str(network), image=str(image),
                                                    noise_std=0.01, seed=case.seed))
        lifted = prepared.problem.network
        assert lifted.reference is not None
        x = torch.full_like(prepared.problem.zeros_input(), 0.5).requires_grad_(True)
        a, b = _median_seconds([lifted.forward, lifted.reference], x)
        print(f"| {arch} | {len(lifted.rewrites)} | {1e3 * a:.2f} | {1e3 * b:.2f} | "
              f"{a / b:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
