"""Item 7: the engine is device-agnostic; on a CUDA machine, time the circle there too.

Without CUDA this section records that it was skipped and checks the property it can check
on the CPU: a float64 run keeps float64 everywhere (every tensor the solvers create takes its
dtype and device from an input, which is what makes a CUDA run possible).
"""

from __future__ import annotations

import time

import torch

from benchmarks._common import Figure, Section


def _dtype_follows_input() -> tuple[bool, str]:
    from benchmarks.problems import circle
    from lbi_engine.solvers import StopRule, final, solve

    case = circle(1, dtype=torch.float64, quick=True)
    rec = final(solve(case.problem, "pdhg", stop=StopRule(max_iter=20, tol=0),
                      options={"anderson": 5}))
    tensors = [rec.x, rec.objective, rec.primal_residual, rec.dual_residual,
               rec.extras["dual"]]
    ok = all(t.dtype == torch.float64 for t in tensors)
    return ok, ", ".join(str(t.dtype) for t in tensors)


def run(quick: bool = False) -> Section:
    section = Section("device", "7. Devices")
    ok, dtypes = _dtype_follows_input()
    section.add(Figure("float64 run keeps float64 in every record tensor", float(ok), "",
                       target="1 (true)", passed=ok, note=dtypes))
    if not torch.cuda.is_available():
        section.skipped = ("no CUDA device on this machine; the CUDA timings run when "
                           "`torch.cuda.is_available()`.")
        return section
    from benchmarks.bench_iteration import per_iteration
    from benchmarks.problems import circle

    for batch in (1, 64):
        case = circle(batch, quick=quick)
        problem = case.problem
        problem.network = problem.network.to(device="cuda")
        problem.y_delta = problem.y_delta.cuda()
        problem.x_true = None
        problem.__post_init__()
        from benchmarks.problems import floor_of

        case.floor = _synced(floor_of(problem.network, batch))
        start = time.perf_counter()
        m = per_iteration(case, rounds=10, chunk=50)
        section.add(Figure(f"CUDA circle, batch {batch}: time per iteration", m["solver"] * 1e3,
                           "ms", m["floor"] * 1e3, "floor (ms)", m["ratio"],
                           note=f"{torch.cuda.get_device_name(0)}; "
                           f"{time.perf_counter() - start:.0f} s"))
    return section


def _synced(fn):  # noqa: ANN001, ANN202 - a tiny wrapper
    def run() -> None:
        fn()
        torch.cuda.synchronize()

    return run
