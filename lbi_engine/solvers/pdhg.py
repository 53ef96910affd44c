"""PDHG (Condat–Vũ) for one layer: min_x B_Psi(data, W x + b) + alpha R(x)  (MATH.md §3).

The x_0 block of the joint method is the same iteration with the next auxiliary variable as
data, so :class:`PrimalDualBlock` is shared by both.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from lbi_engine.errors import InputError
from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers._primal_dual import PrimalDualBlock
from lbi_engine.solvers.base import CancelToken, IterateRecord, StopReason, StopRule
from lbi_engine.solvers.options import SolverOptions
from lbi_engine.solvers.steps import (  # noqa: F401 - re-exported: callers import them from here
    FORWARD_BACKWARD_SAFE,
    PAPER_PRIMAL,
    paper_steps_warning,
    step_sizes,
)


def run_pdhg(
    problem: object,
    stop: StopRule,
    options: SolverOptions,
    init: dict | None,
    cancel: CancelToken | None,
    report_every: int,
) -> Iterator[IterateRecord]:
    """PDHG on a one-layer network (the paper's eq. 12)."""
    if problem.depth != 1:
        raise InputError(
            f"method 'pdhg' inverts a single layer, but '{problem.network.name}' has "
            f"{problem.depth} layers; use method 'joint' or 'layerwise'."
        )
    init = init or {}
    start = int(init.get("iteration", 0))
    monitor = RunMonitor(problem, "pdhg", stop, cancel, report_every, start_iteration=start)
    x0 = init.get("x", problem.zeros_input())
    block = PrimalDualBlock(problem.network.layers[0], problem, options, x0, init.get("dual"))
    _describe_steps(monitor, block)
    yield _record(monitor, block, problem)
    monitor.watch.start()
    with torch.no_grad():
        while monitor.before_iteration():
            dx, dz = block.step(problem.y_delta, monitor)
            monitor.iteration += 1
            monitor.converged(dx, dz)
            if stop.residual_tol is not None and monitor.due():
                small = block.optimality(problem.y_delta) < stop.residual_tol
                monitor.finish(small, StopReason.TOLERANCE)
            if monitor.running and monitor.due():
                yield _record(monitor, block, problem)
    monitor.watch.pause()
    yield _record(monitor, block, problem, final=True)


def _describe_steps(monitor: RunMonitor, block: PrimalDualBlock) -> None:
    monitor.extras["tau_x"] = block.tau_x
    monitor.extras["tau_z"] = block.tau_z
    monitor.extras["lipschitz"] = block.lipschitz
    if block.warning:
        monitor.extras["warning"] = block.warning


def _record(
    monitor: RunMonitor, block: PrimalDualBlock, problem: object, final: bool = False
) -> IterateRecord:
    monitor.extras["dual"] = block.z
    if problem.depth == 1 and (final or monitor.due()):
        monitor.watch.pause()  # reporting, not solving
        with torch.no_grad():
            monitor.extras["optimality"] = block.optimality(problem.y_delta)
    return monitor.record(block.x, [], final=final)
