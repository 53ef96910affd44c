"""64 codes inverted at once against one at a time (cost per sample).

Both run the same number of iterations (tol = 0, so no sample stops early) and the time is the
wall time of the whole ``solve`` call (set-up, iterations, first and final record), i.e. what a
user pays per inversion. Rounds alternate the batch run with single runs of different digits.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks._common import Figure, Section, check, threads
from benchmarks.problems import Case, mnist_cnn, mnist_perceptron
from benchmarks.suite.bench_iteration import _strip_truth

BATCH = 64
TARGET = 0.1  # per-sample cost of the batch / cost of one single inversion


#: Both sides run the same Condat–Vũ iteration: with ``steps="auto"`` a single perceptron
#: inversion would run the accelerated method (few, TV-heavy iterations) and the batch the
#: fused Condat–Vũ one (pdhg.AUTO_BATCH_MIN_OUTPUTS), so equal iteration counts would compare
#: different work.
STEPS = "balanced"


def inversion_seconds(case: Case, iterations: int) -> float:
    """Wall time of one complete solve() of ``iterations`` iterations."""
    from lbi_engine.settings.solver import SolverOptions
    from lbi_engine.solvers import StopRule, solve

    problem = _strip_truth(case.problem)
    start = time.perf_counter()
    for _ in solve(problem, case.method, stop=StopRule(max_iter=iterations, tol=0),
                   report_every=iterations, options=SolverOptions(steps=STEPS)):
        pass
    return time.perf_counter() - start


def per_sample_ratio(build: Callable[[int, int], Case], iterations: int, rounds: int,
                     singles: int, batch: int = BATCH) -> dict[str, Any]:
    batched = build(batch, 0)
    ones = [build(1, k) for k in range(singles)]
    inversion_seconds(batched, 2)  # warm-up (norms are cached per network)
    inversion_seconds(ones[0], 2)
    per_sample, single, ratios = [], [], []
    for r in range(rounds):
        b = inversion_seconds(batched, iterations) / batch
        s = inversion_seconds(ones[r % singles], iterations)
        per_sample.append(b)
        single.append(s)
        ratios.append(b / s)
    return {"per_sample": statistics.median(per_sample), "single": statistics.median(single),
            "ratio": statistics.median(ratios)}


def run(quick: bool = False) -> Section:
    section = Section("batching", "2. Batching: 64 codes at once against one at a time")
    rounds = 3 if quick else 7
    cases = [
        ("MNIST perceptron (pdhg)", lambda b, s: mnist_perceptron(b, start=s),
         60 if quick else 300),
        ("MNIST CNN (joint)", lambda b, s: mnist_cnn(b, start=s), 10 if quick else 60),
    ]
    for n_threads in (1,) if quick else (1, 2):
        restore = threads(n_threads)
        try:
            for name, build, iterations in cases:
                m = per_sample_ratio(build, iterations, rounds, singles=4)
                target = n_threads == 1
                section.add(Figure(
                    f"{name}, {n_threads} thread{'s' if n_threads > 1 else ''}: "
                    f"per sample in a batch of {BATCH}",
                    m["per_sample"] * 1e3, "ms", m["single"] * 1e3, "one at a time (ms)",
                    m["ratio"], f"<= {TARGET:g}" if target else "",
                    check(m["ratio"], TARGET) if target else None,
                    f"{iterations} iterations per inversion, steps={STEPS}"))
                section.data[f"{name} {n_threads}"] = m
        finally:
            restore()
    section.note(
        "Ratio = (batch wall time / 64) / (wall time of one single inversion), median over "
        "rounds that alternate the two. The batch holds 64 different validation digits; the "
        "single runs cycle through 4 of them. The target is checked with one thread (the "
        "default for the GUI, see the threads figures of section 1); two threads are shown "
        "for scripts.")
    return section
