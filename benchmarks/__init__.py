"""Performance benchmarks of lbi: ``python -m benchmarks [--quick] [--only NAME]``.

Not part of the test run (the smoke test tests/test_benchmarks_smoke.py only checks that the
code runs). Each benchmark module has ``run(quick: bool) -> Section``; the results go to
``benchmarks/RESULTS.md`` with the date, the machine and, for every figure, the floor or peer
it was measured against in the same run. ``NOTES.md`` (hand-written: what was changed in the
hot paths, predicted vs measured effect) is copied to the top of the report.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS_FILE = HERE / "RESULTS.md"
NOTES_FILE = HERE / "NOTES.md"

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
