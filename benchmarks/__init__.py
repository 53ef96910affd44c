"""Performance benchmarks of lbi: ``python -m benchmarks [--quick] [--only NAME]``.

Not part of the test run (tests/benchmarks/ only checks that the code runs).

* ``suite/``: what ``python -m benchmarks`` runs (:data:`BENCHMARKS`). Each module has
  ``run(quick: bool) -> Section``; the results go to ``benchmarks/RESULTS.md`` with the date,
  the machine and, for every figure, the floor or peer it was measured against in the same
  run. ``NOTES.md`` (hand-written: what was changed in the hot paths, predicted vs measured
  effect) is copied to the top of the report.
* ``studies/``: calibrations and one-off studies, each run alone
  (``python -m benchmarks.studies.NAME``), each docstring opening with the question it
  answered; most write their own section of RESULTS.md.
* ``heldout/``: the held-out evaluation of the defaults (``python -m benchmarks.heldout``).
* ``results/``: generated tables, CSVs and plots (:data:`RESULTS_DIR`).
* Beside them, what several of these share: ``_common`` (timing, machine, sections),
  ``problems`` and ``_reference`` (the benchmark problems and their cvxpy optima),
  ``_hand_written`` (what a PyTorch user writes instead of lbi), ``report`` (RESULTS.md), and
  ``bench_graph_slices`` (vision-network slices, a study that other studies build on).
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS_FILE = HERE / "RESULTS.md"
NOTES_FILE = HERE / "NOTES.md"
#: generated tables, CSVs and plots that the studies write beside RESULTS.md
RESULTS_DIR = HERE / "results"

#: name -> (module, title); the order is the report's
BENCHMARKS: dict[str, tuple[str, str]] = {
    "iteration": ("bench_iteration", "per-iteration cost against the floor, threads"),
    "batching": ("bench_batching", "batched against one-at-a-time inversion"),
    "convergence": ("bench_convergence", "iterations to a 1e-4 objective gap, by step rule"),
    "alternatives": ("bench_alternatives", "against cvxpy and pyproximal"),
    "memory": ("bench_memory", "memory over repeated runs, allocations per iteration"),
    "device": ("bench_device", "device-agnostic run (CUDA when available)"),
    "gui": ("bench_gui", "GUI overhead: throughput, event-loop latency, start-up"),
    "cluster": ("bench_cluster", "sweeps on Dask: cells per second, 1 against 2 workers"),
}
