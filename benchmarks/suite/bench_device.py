"""The engine is device-agnostic; on a CUDA machine, time the circle there too.

Without CUDA this section records that it was skipped and checks the property it can check
on the CPU: a float64 run keeps float64 everywhere (every tensor the solvers create takes its
dtype and device from an input, which is what makes a CUDA run possible).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from benchmarks._common import Figure, Section


def _dtype_follows_input() -> tuple[bool, str]:
    from benchmarks.problems import circle
    from lbi_engine.solvers import StopRule, final, solve

    case = circle(1, dtype=torch.float64, quick=True)
    rec = final(solve(case.problem, "pdhg", stop=StopRule(max_iter=20, tol=0),
                      options={"anderson": 5}))
    assert rec.warm is not None and rec.warm.dual is not None  # the primal–dual block's
    tensors = [rec.x, rec.objective, rec.primal_residual, rec.dual_residual, rec.warm.dual]
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
    from benchmarks.problems import circle
    from benchmarks.suite.bench_iteration import per_iteration

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


# --- per-iteration time and throughput on every device present (standalone) -----------------
#
# ``PYTHONPATH=. python -m benchmarks.suite.bench_device [--quick] [--write] [--batches 1,16]``:
# the joint method on bench_sizes' geometries at a fixed alpha, per device (the CPU with one
# torch thread, and CUDA when torch finds it; skipped with a line otherwise) and batch size:
# seconds per iteration and throughput (samples x iterations per second). Sized to finish in
# under 5 minutes on a GPU machine (``--devices cuda`` leaves the CPU rows out: 4 min on this
# loaded 2-core machine; ``--quick``: tiny stand-ins, for the smoke test).

MARK_START = "<!-- bench_device: start -->"
MARK_END = "<!-- bench_device: end -->"


def devices() -> list[str]:
    """The devices to time: the CPU, and CUDA where torch finds a GPU."""
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


def joint_rate(name: str, device: str, batch: int, steps: int, quick: bool = False,
               dtype: torch.dtype = torch.float32) -> dict[str, float]:
    """Seconds per joint iteration and samples x iterations per second for a batch of
    ``batch`` copies of bench_sizes' geometry ``name`` (different noise per copy)."""
    from benchmarks.studies import bench_sizes
    from lbi_engine.models.network import LiftedNetwork
    from lbi_engine.problem import InversionProblem
    from lbi_engine.regularisers import make_regulariser
    from lbi_engine.solvers import StopRule, final, solve

    geometry = (bench_sizes.QUICK if quick else bench_sizes.GEOMETRIES)[name]
    module = bench_sizes.module_of(geometry).to(dtype)
    truth = torch.from_numpy(bench_sizes.truth_of(geometry.input_shape)).to(dtype)
    network = LiftedNetwork.from_module(module, geometry.input_shape).to(device=device)
    x = truth.to(device)[None].expand(batch, *truth.shape).contiguous()
    g = torch.Generator(device=device).manual_seed(0)
    y = network.forward(x)
    y = y + bench_sizes.NOISE * torch.randn(y.shape, generator=g, device=device, dtype=dtype)
    problem = InversionProblem(network, y, make_regulariser("tv"), 1e-3, x_true=x)

    def run(n: int) -> float:
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        final(solve(problem, "joint", stop=StopRule(max_iter=n, tol=0)))
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    run(2)  # builds (norms, kernels) and warms the device outside the timing
    per = min(run(steps) for _ in range(3)) / steps  # the least loaded of three
    return {"step": per, "throughput": batch / per}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    import argparse

    from benchmarks._common import machine, write_section

    parser = argparse.ArgumentParser(prog="python -m benchmarks.suite.bench_device")
    parser.add_argument("--quick", action="store_true", help="tiny stand-ins (seconds)")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument("--batches", default="1,16", help="batch sizes (default 1,16)")
    parser.add_argument("--devices", default=None,
                        help="comma-separated subset of the devices present (default: all; "
                             "on a GPU machine `--devices cuda` skips the CPU's ~2-4 min)")
    parser.add_argument("--steps", type=int, default=None,
                        help="iterations per timing (default 20, quick 3)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    steps = args.steps or (3 if args.quick else 20)
    batches = [int(b) for b in args.batches.split(",")]
    from benchmarks.studies import bench_sizes

    rows: list[dict[str, Any]] = []
    present = devices()
    if "cuda" not in present:
        print("cuda: skipped (torch finds no CUDA device on this machine)", flush=True)
    chosen = present if args.devices is None else [
        d for d in args.devices.split(",") if d in present]
    for device in chosen:
        for name in bench_sizes.GEOMETRIES:
            for batch in batches:
                m = joint_rate(name, device, batch, steps, quick=args.quick)
                rows.append({"device": device, "name": name, "batch": batch, **m})
                print(f"{device} {name} batch {batch}: {m['step'] * 1e3:.2f} ms/iteration, "
                      f"{m['throughput']:.1f} sample-iterations/s", flush=True)
    info = machine()
    gpu = info.get("gpu", "none")
    command = ("PYTHONPATH=. python -m benchmarks.suite.bench_device" + (" --quick" if args.quick
               else "") + f" --batches {args.batches}" + (
                   f" --devices {args.devices}" if args.devices else "") + " --write")
    lines = [MARK_START, "## Devices: joint iterations per second (bench_device)", "",
             f"`{command}` — CPU {info.get('cpu', '?')} (one torch thread), GPU {gpu}"
             + ("" if torch.cuda.is_available() else
                " (no CUDA device on this machine: the CUDA rows are skipped)")
             + (" (quick: tiny stand-ins, indicative only)" if args.quick else "") + ".",
             "", "| device | geometry | batch | ms / iteration | sample-iterations / s |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['device']} | {r['name']} | {r['batch']} | {r['step'] * 1e3:.3f} | "
              f"{r['throughput']:.1f} |" for r in rows]
    lines.append(MARK_END)
    text = "\n".join(lines)
    if args.write:
        write_section(text, MARK_START, MARK_END)
    print(text)
    return rows


if __name__ == "__main__":
    main()
