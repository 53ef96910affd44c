"""What does one solver step cost against the floor of its own products?

The CPU cost of one step against the floor of its products.

``step_cost``: section 4 of ``bench_multilayer``, one accelerated joint step for one image in
its forms (default, CSR convolutions, torch operations, torch on the maps' own kernels), one
record's objective, and each layer's products.

``one_layer_step_cost``: the Condat–Vũ iteration of method pdhg (``--steps balanced``)
against one W x plus one W^T r, ``PYTHONPATH=$PWD OMP_NUM_THREADS=1 python -m
benchmarks.studies._step_cost [THREADS [BATCH [ROUNDS]]]`` (benchmarks/RESULTS.md, "one-layer step
cost");
``one_layer_step_parts``, the same step taken apart (``... _step_cost parts``)."""

from __future__ import annotations

import math
import statistics
import time
from typing import Any
from unittest import mock

import torch


def step_cost(steps: int = 200, rounds: int = 5) -> list[str]:
    """CPU time per accelerated joint step (process time, so that other processes' load
    does not enter), interleaved over ``rounds``; digit 5, sigma 0.05, alpha 0.02: the step
    a default run takes (one sample: the gradient on buffers with the convolutions as
    gathered GEMMs, the rest compiled), the same with the convolutions as CSR matrices (the
    former default), the step in torch operations (CSR), and in torch
    on the maps' own convolutions; and one record's objective (a record comes every 5 steps
    on the path of alpha "auto")."""
    from lbi_engine.api import InversionRequest, prepare
    from lbi_engine.models.zoo import load_zoo
    from lbi_engine.solvers import StopRule
    from lbi_engine.solvers._monitor import RunMonitor
    from lbi_engine.solvers.joint import fista as _joint_accel
    from lbi_engine.solvers.joint import start as _joint_start

    prepared = prepare(InversionRequest(network="mnist-cnn-ae", regulariser="tv",
                                        split="val", index=5,
                                        noise_std=0.05, method="joint", alpha=0.02),
                       load_zoo("mnist-cnn-ae"))
    problem = prepared.problem
    monitor = RunMonitor(problem, "joint", StopRule(), None, 10**9)

    def stepping(state: Any) -> Any:
        return lambda: state.step(monitor)

    with torch.no_grad():
        x0 = _joint_start.backprojection_start(problem)
        start = [x0, *problem.forward_aux(x0)]
        default = _joint_accel.JointFista(problem, start)
        csr = _as_csr(_joint_accel.JointFista(problem, start))
        torch_ops = _as_csr(_joint_accel.JointFista(problem, start, compiled=False))
        plain = _joint_accel.JointFista(problem, start, compiled=False)
        plain.one = None
        plain.maps = [layer.affine for layer in problem.network.layers]
        jobs = {"the default step (one sample: gradient on buffers, convolutions as gathered "
                "GEMMs, the rest compiled)": stepping(default),
                "the same with the convolutions as CSR matrices": stepping(csr),
                "the same step in torch operations (CSR convolutions)": stepping(torch_ops),
                "torch operations on the maps' own conv2d / conv_transpose2d": stepping(plain),
                "one record's objective (default)": default.objective_parts}
        times: dict[str, list[float]] = {k: [] for k in jobs}
        for _ in range(rounds):
            for name, job in jobs.items():
                t0 = time.process_time()
                for _ in range(steps):
                    job()
                times[name].append((time.process_time() - t0) / steps * 1e3)
    lines = ["| step | CPU ms per call (median of rounds) |", "|---|---:|"]
    lines += [f"| {k} | {statistics.median(v):.3f} |" for k, v in times.items()]
    lines += ["", *_product_costs(default, csr, rounds)]
    print("\n".join(lines), flush=True)
    return lines


def _product_costs(default: Any, csr: Any, rounds: int, calls: int = 1000) -> list[str]:
    """CPU us per product of each layer (W x + b, and W^T r added into a buffer) in the
    default one-sample path and with CSR convolutions, interleaved over ``rounds``."""
    lines = ["| layer | map | W x + b, default (us) | W^T r, default (us) | W x + b, CSR (us) | "
             "W^T r, CSR (us) |", "|---:|---|---:|---:|---:|---:|"]
    for i, layer in enumerate(default.layers):
        n_in, n_out = int(layer.affine.in_numel), int(layer.affine.out_numel)
        x, out = torch.rand(n_in), torch.empty(n_out)
        r, back = torch.rand(n_out), torch.zeros(n_in)
        cells = []
        for products in (default.one._prods[i], csr.one._prods[i]):
            for method, args in ((products.apply_into, (x, out)),
                                 (products.adjoint_add, (r, back))):
                best = math.inf
                for _ in range(rounds):
                    t0 = time.process_time()
                    for _ in range(calls):
                        method(*args)
                    best = min(best, (time.process_time() - t0) / calls * 1e6)
                cells.append(f"{best:.1f}")
        lines.append(f"| {i + 1} | {layer.affine.describe()} | {' | '.join(cells)} |")
    return lines


def _as_csr(state: Any) -> Any:
    """``state`` (a JointFista) with its one-sample convolution products replaced by the CSR
    matrices the batched path uses."""
    from lbi_engine.solvers.joint.one_sample import MatrixProducts

    for i, used in enumerate(state.maps):
        if type(state.one._prods[i]).__name__ == "ConvProducts":
            bias = None if used.bias is None else used.bias.reshape(-1).contiguous()
            state.one._prods[i] = MatrixProducts(used.forward_matrix, used.backward_matrix, bias)
    return state



def one_layer_step_cost(batch: int = 1, rounds: int = 120, chunk: int = 40,
                        threads: int = 1) -> list[str]:
    """The Condat–Vũ iteration of method pdhg (``--steps balanced``; circle problem, W
    512x4096, float32, ``threads`` torch threads) against the floor of one W x plus one W^T r,
    in the same rounds: the whole iteration as a run takes it (``driver.iterate`` on the
    method that ``run_pdhg`` drives, monitor included; records, not solver time, are not), the
    same with W's two products as BLAS calls (before the one-pass gradient,
    ``kernels.dense_gradient``), that with the changes computed every step (as before the
    records took them over), that with x's slots where the allocator puts them too (as before
    they were placed half a page from W: no 4K aliasing in W^T r), and the block's step alone.
    One thread: CPU time of this process (``time.process_time``: other processes' load does
    not enter, their cache traffic does); more: wall time. Ratio = median over rounds of (time
    per iteration) / (floor time per call), the jobs' order rotated from round to round;
    'fastest' = fastest round / fastest floor round."""
    from benchmarks.problems import circle
    from benchmarks.suite.bench_iteration import _strip_truth
    from lbi_engine.settings.solver import SolverOptions
    from lbi_engine.solvers import StopRule
    from lbi_engine.solvers._monitor import RunMonitor
    from lbi_engine.solvers.driver import iterate
    from lbi_engine.solvers.one_layer import inplace as _inplace
    from lbi_engine.solvers.one_layer import primal_dual as _primal_dual
    from lbi_engine.solvers.one_layer.inplace import ONE_PASS_MAX_BATCH
    from lbi_engine.solvers.one_layer.method import OneLayer, make_block
    from lbi_engine.solvers.one_layer.primal_dual import PrimalDualBlock

    torch.set_num_threads(threads)
    clock = time.process_time if threads == 1 else time.perf_counter
    case = circle(batch)
    problem = _strip_truth(case.problem)
    options = SolverOptions.from_dict({"steps": "balanced"})
    # the default stop rule's mode ("objective", run by the records); tol 0 keeps records
    # (every 50 iterations in a real run, not solver time) out of the rounds
    stop = StopRule(max_iter=chunk, tol=0.0)

    def block() -> Any:
        return make_block(problem.network.layers[0], problem, options, problem.zeros_input(),
                          None, tol_mode=stop.tol_mode)

    def loop(method: OneLayer) -> Any:
        def run() -> None:  # chunk iterations, no record (report_every beyond the chunk)
            for _ in iterate(method, RunMonitor(problem, "pdhg", stop, None, 10**9)):
                pass
        return run

    # above its batch limit the one-pass kernel is forced, to show why the limit is there
    with mock.patch.object(_inplace, "ONE_PASS_MAX_BATCH", max(batch, ONE_PASS_MAX_BATCH)):
        current = OneLayer(block(), problem, None)
    with mock.patch.object(_primal_dual, "one_pass_plan", lambda *args: None):
        blas = OneLayer(block(), problem, None)  # W's products as two BLAS calls
        with mock.patch.object(PrimalDualBlock, "step_noting_changes", PrimalDualBlock.step):
            eager = OneLayer(block(), problem, None)  # and its changes every step
            with mock.patch.object(_primal_dual, "_off_the_page_of",
                                   lambda weight, shape, dtype, *_: torch.zeros(shape,
                                                                                dtype=dtype)):
                before = OneLayer(block(), problem, None)  # and its slots where they fall
    alone, data = block(), case.problem.y_delta
    monitor = RunMonitor(problem, "pdhg", stop, None, 10**9)

    def step() -> None:
        for _ in range(chunk):
            alone.step(data, monitor)

    def floor() -> None:
        for _ in range(chunk):
            case.floor()

    jobs = {"whole iteration (run loop)": loop(current),
            "whole iteration, W's products as two BLAS calls": loop(blas),
            "that, changes computed every step": loop(eager),
            "that, slots where they fall (the step after the second pass)": loop(before),
            "block step alone (changes every step)": step, "floor": floor}
    times: dict[str, list[float]] = {k: [] for k in jobs}
    with torch.no_grad():
        for job in jobs.values():
            job()  # warm-up
        order = list(jobs)
        for k in range(rounds):
            for name in order[k % len(order):] + order[:k % len(order)]:  # each first in turn
                t0 = clock()
                jobs[name]()
                times[name].append((clock() - t0) / chunk)
    base = times.pop("floor")
    path = "fused" if getattr(current.block, "_fused", None) is not None else "torch"
    kind = "CPU" if threads == 1 else "wall"
    lines = [f"circle, batch {batch}, {threads} thread(s), {type(current.block).__name__} "
             f"({path} TV path); floor {statistics.median(base) * 1e3:.3f} ms {kind}",
             f"| timed | {kind} ms per iteration (median) | / floor (median of rounds) | "
             "fastest |", "|---|---:|---:|---:|"]
    for name, row in times.items():
        ratio = statistics.median(s / f for s, f in zip(row, base, strict=True))
        lines.append(f"| {name} | {statistics.median(row) * 1e3:.3f} | {ratio:.3f} | "
                     f"{min(row) / min(base):.3f} |")
    print("\n".join(lines), flush=True)
    return lines


def one_layer_step_parts(rounds: int = 60, calls: int = 40) -> list[str]:
    """One Condat–Vũ step of ``one_layer_step_cost``'s case taken apart, CPU time per call
    (one thread, median over rounds, parts interleaved): the floor, the step's products with
    W as two BLAS calls into its buffers and as the one-pass kernel, the fused TV kernel, and
    the whole block step with either (changes left to the records, as a run takes it) and with
    the BLAS calls and the changes every step (the step after the second pass)."""
    from benchmarks.problems import circle
    from benchmarks.suite.bench_iteration import _strip_truth
    from lbi_engine.settings.solver import SolverOptions
    from lbi_engine.solvers import StopRule
    from lbi_engine.solvers._monitor import RunMonitor
    from lbi_engine.solvers.one_layer import primal_dual as _primal_dual
    from lbi_engine.solvers.one_layer.method import make_block

    torch.set_num_threads(1)
    case = circle(1)
    problem = _strip_truth(case.problem)
    options = SolverOptions.from_dict({"steps": "balanced"})

    def block() -> Any:
        return make_block(problem.network.layers[0], problem, options, problem.zeros_input(),
                          None, tol_mode="objective")

    one = block()
    with mock.patch.object(_primal_dual, "one_pass_plan", lambda *args: None):
        blas = block()
    data = case.problem.y_delta
    monitor = RunMonitor(problem, "pdhg", StopRule(max_iter=10**9, tol=0.0), None, 10**9)
    jobs = {"floor: W x + b, W^T r (allocating)": case.floor,
            "the step's products into its buffers (addmm, ReLU, - data, addmm)":
                lambda: blas._products(data, 0, blas.x_pairs[1][1], None),
            "the same in one pass over W (kernels/dense_gradient.py)":
                lambda: one._products(data, 0, one.x_pairs[1][1], None),
            "fused TV kernel (div, step, box, dual ascent, projection, four norms)":
                lambda: one._fused(0),
            "whole step, one pass": lambda: one.step_noting_changes(data, monitor),
            "whole step, two BLAS calls": lambda: blas.step_noting_changes(data, monitor),
            "whole step, two BLAS calls, changes every step": lambda: blas.step(data, monitor)}
    times: dict[str, list[float]] = {k: [] for k in jobs}
    with torch.no_grad():
        for job in jobs.values():
            for _ in range(calls):
                job()  # warm-up
        for _ in range(rounds):
            for name, job in jobs.items():
                t0 = time.process_time()
                for _ in range(calls):
                    job()
                times[name].append((time.process_time() - t0) / calls * 1e6)
    base = times["floor: W x + b, W^T r (allocating)"]
    lines = ["| part | CPU us | / floor |", "|---|---:|---:|"]
    lines += [f"| {name} | {statistics.median(row):.1f} | "
              f"{statistics.median(s / f for s, f in zip(row, base, strict=True)):.3f} |"
              for name, row in times.items()]
    lines += ["", _floor_threads(case.floor)]
    print("\n".join(lines), flush=True)
    return lines


def _floor_threads(floor: Any, calls: int = 2000) -> str:
    """Whether the floor's products use a second thread: CPU time over wall time of ``calls``
    floors at one and at two torch threads (about 2 where both threads work)."""
    cells = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for _ in range(calls // 10):
            floor()
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(calls):
            floor()
        wall = time.perf_counter() - w0
        cells.append(f"{threads} thread(s): {wall / calls * 1e6:.0f} us wall, CPU/wall "
                     f"{(time.process_time() - c0) / wall:.2f}")
    torch.set_num_threads(1)
    return "floor " + "; ".join(cells)


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["parts"]:
        one_layer_step_parts()
    else:
        # THREADS [BATCH [ROUNDS]]
        given = [int(v) for v in sys.argv[1:4]]
        one_layer_step_cost(**dict(zip(("threads", "batch", "rounds"), given, strict=False)))
