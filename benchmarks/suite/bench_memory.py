"""No memory growth over repeated runs; no per-iteration allocation of state arrays.

* Repeated runs: the engine facade (``api.prepare`` + ``api.iterate`` to the end, keeping only
  the last record, as the GUI does) run back to back; resident set size (RSS, /proc) after a
  few warm-up runs against after all runs, and the peak RSS (``ru_maxrss``).
* Steady state: torch's profiler with ``profile_memory=True`` over iterations of the PDHG and
  joint loops (the same calls the solvers make, records excluded): allocations per iteration,
  their total and largest size. The state (x, z, changes, buffers) lives in buffers made once;
  what remains are the few per-sample scalars (norms, ratios) the stop test needs.
"""

from __future__ import annotations

import resource
from typing import Any

import torch

from benchmarks._common import Figure, Section, check, threads
from benchmarks.problems import circle, mnist_cnn
from benchmarks.suite.bench_iteration import _strip_truth

GROWTH_MB = 50.0


def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def repeated_runs(runs: int, warmup: int, requests: list[Any]) -> dict[str, float]:
    """RSS after ``warmup`` runs and after ``runs`` more, cycling through ``requests``."""
    import gc

    from lbi_engine.api import iterate, prepare

    bundles: dict[str, Any] = {}

    def one(k: int) -> None:
        request = requests[k % len(requests)]
        prepared = prepare(request, bundles.get(request.network))
        bundles[request.network] = prepared.bundle
        last = None
        for record in iterate(prepared):
            last = record
        assert last is not None and last.final

    for k in range(warmup):
        one(k)
    gc.collect()
    before, peak_before = rss_mb(), peak_mb()
    samples = []
    for k in range(runs):
        one(warmup + k)
        if k % max(1, runs // 10) == 0:
            samples.append(rss_mb())
    gc.collect()
    after = rss_mb()
    return {"before": before, "after": after, "growth": after - before,
            "peak_growth": peak_mb() - peak_before, "samples": samples}


def allocations_per_iteration(case: Any, iterations: int) -> dict[str, float]:
    """Allocations made by ``iterations`` solver iterations (after warm-up), per iteration."""
    from torch.profiler import ProfilerActivity, profile

    import lbi_engine.solvers.one_layer.method as pdhg_module
    from lbi_engine.solvers import StopRule, solve
    from lbi_engine.solvers._monitor import RunMonitor

    # label the record builders so that their allocations (not per-iteration) can be skipped
    originals = (RunMonitor.record, pdhg_module._record)

    def labelled(fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with torch.profiler.record_function("lbi.record"):
                return fn(*args, **kwargs)

        return wrapper

    RunMonitor.record, pdhg_module._record = labelled(originals[0]), labelled(originals[1])
    try:
        records = solve(_strip_truth(case.problem), case.method,
                        stop=StopRule(max_iter=10**9, tol=1e-12), report_every=iterations)
        next(records)
        next(records)  # warm-up chunk
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            next(records)  # one chunk of `iterations` iterations and one record
        records.close()
    finally:
        RunMonitor.record, pdhg_module._record = originals
    in_loop = _allocations(prof, exclude_record=True)
    return {k: v / iterations for k, v in in_loop.items() if k != "largest"} | {
        "largest": in_loop["largest"]}


def _allocations(prof: Any, exclude_record: bool) -> dict[str, float]:
    """Positive allocations of ops, skipping everything under the record builder."""
    count = total = largest = 0
    skip_until = -1.0
    for e in sorted(prof.events(), key=lambda e: e.time_range.start):
        if exclude_record and e.name == "lbi.record":
            skip_until = max(skip_until, e.time_range.end)
        if e.time_range.start <= skip_until:
            continue
        size = e.cpu_memory_usage or 0
        if e.name != "[memory]" and size > 0:
            count += 1
            total += size
            largest = max(largest, size)
    return {"count": count, "bytes": total, "largest": largest}


def run(quick: bool = False) -> Section:
    from lbi_engine.api import InversionRequest

    section = Section("memory", "6. Memory: repeated runs and per-iteration allocations")
    restore = threads(1)
    try:
        runs = 40 if quick else 200
        requests = [
            InversionRequest(network="mnist-perceptron-ae", method="pdhg", alpha=5e-2,
                             noise_std=0.0, max_iter=30, index=k, report_every=10)
            for k in range(3)
        ] + [InversionRequest(network="mnist-cnn-ae", method="joint", max_iter=10, index=3,
                              report_every=5)]
        m = repeated_runs(runs, warmup=8, requests=requests)
        section.add(Figure(f"RSS growth over {runs} consecutive engine runs", m["growth"], "MB",
                           None, f"(RSS after warm-up {m['before']:.0f} MB)", None,
                           f"< {GROWTH_MB:g} MB", check(m["growth"], GROWTH_MB),
                           f"peak RSS change {m['peak_growth']:.1f} MB; RSS samples "
                           + ", ".join(f"{s:.0f}" for s in m["samples"]) + " MB"))
        for name, case in (("PDHG, circle, 1 image", circle(1, quick=quick)),
                           ("PDHG, circle, batch of 64", circle(64, quick=quick)),
                           ("joint, MNIST CNN, 1 image", mnist_cnn(1))):
            a = allocations_per_iteration(case, 20)
            state = case.problem.zeros_input().numel() * case.problem.zeros_input().element_size()
            section.add(Figure(f"{name}: allocations per iteration", a["count"], "",
                               note=f"{a['bytes']:.0f} bytes per iteration, largest single "
                               f"allocation {a['largest']:.0f} bytes (one image x: {state} "
                               "bytes)"))
            section.data[name] = a
        section.data["repeated"] = m
    finally:
        restore()
    section.note(
        "PDHG allocates no array of state size per iteration: the remaining allocations are "
        "per-sample scalars of the stop test (norms and their ratios, a few bytes each). The "
        "joint method's auxiliary-variable steps (convolutions, activations, prox) still "
        "allocate their results; they are freed every sweep (no growth), and cost about what "
        "the convolutions themselves cost to write.")
    return section
