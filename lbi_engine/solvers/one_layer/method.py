"""PDHG (Condat–Vũ) for one layer: min_x B_Psi(data, W x + b) + alpha R(x)  (MATH.md §3).

The x_0 block of the joint method is the same iteration with the next auxiliary variable as
data, so :class:`PrimalDualBlock` is shared by both. Method ``pdhg`` runs, by default
(``steps="auto"``), the accelerated proximal gradient of ``accelerated.py`` where it
applies (TV without box): same problem, same records, far fewer products with W.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import torch

from lbi_engine.errors import InputError
from lbi_engine.protocols import Layer, Problem
from lbi_engine.settings.solver import SolverOptions
from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.base import IterateRecord, StopReason, WarmStart
from lbi_engine.solvers.driver import Changes, Method, drive, run
from lbi_engine.solvers.one_layer.accelerated import AcceleratedBlock, supported
from lbi_engine.solvers.one_layer.primal_dual import PrimalDualBlock
from lbi_engine.solvers.one_layer.step_sizes import (  # noqa: F401 - re-exported for callers
    FORWARD_BACKWARD_SAFE,
    PAPER_PRIMAL,
    paper_steps_warning,
    step_sizes,
    wants_accelerated,
)

Block = PrimalDualBlock | AcceleratedBlock


def make_block(layer: Layer, problem: Problem, options: SolverOptions, x0: torch.Tensor,
               z0: torch.Tensor | None, init: dict[str, Any] | None = None,
               tol_mode: str = "objective") -> Block:
    """The accelerated block where ``options.steps`` asks for it and it applies, else the
    Condat–Vũ block (whose "auto"/"accelerated" steps are then "balanced"). ``init`` may hold
    the accelerated block's momentum ("x_prev", "momentum") from a record (warm_start)."""
    if wants_accelerated(options.steps, tol_mode) and supported(problem, options, True):
        init = init or {}
        momentum = None
        if init.get("x_prev") is not None and init.get("momentum") is not None:
            momentum = (init["x_prev"], init["momentum"])
        return AcceleratedBlock(layer, problem, options, x0, z0, momentum)
    return PrimalDualBlock(layer, problem, options, x0, z0)


class BlockMethod(Method):
    """A one-layer block (Condat–Vũ or accelerated) against fixed data, on the driver; the
    block owns the buffers and the in-place step. Records carry the dual (``warm``) and
    the given auxiliary variables (the layer-wise input stage's estimates)."""

    def __init__(self, block: Block, data: torch.Tensor,
                 aux: list[torch.Tensor] | None = None) -> None:
        self.block, self.data = block, data
        self.aux = aux if aux is not None else []
        # the Condat–Vu block leaves its changes to the records where only they read them
        self._step = (block.step_noting_changes if isinstance(block, PrimalDualBlock)
                      else block.step)

    def state(self) -> tuple[torch.Tensor, list[torch.Tensor]]:
        return self.block.x, self.aux

    def step(self, monitor: RunMonitor) -> Changes | None:
        return self._step(self.data, monitor)

    def record(self, monitor: RunMonitor, final: bool = False) -> IterateRecord:
        monitor.warm = WarmStart(dual=self.block.z)
        return monitor.record(self.block.x, self.aux, final=final)


class OneLayer(BlockMethod):
    """Method ``pdhg``/``one-layer``: records add the optimality residual and the
    accelerated block's momentum; ``StopRule.residual_tol`` stops on the residual."""

    def __init__(self, block: Block, problem: Problem, residual_tol: float | None) -> None:
        super().__init__(block, problem.y_delta)
        self.problem, self.residual_tol = problem, residual_tol

    def after_step(self, monitor: RunMonitor) -> None:
        if self.residual_tol is not None and monitor.due():
            small = self.block.optimality(self.data) < self.residual_tol
            monitor.finish(small, StopReason.TOLERANCE)

    def record(self, monitor: RunMonitor, final: bool = False) -> IterateRecord:
        # a module-level function: benchmarks/bench_memory.py labels it to skip its allocations
        return _record(monitor, self.block, self.problem, final=final)


def _one_layer(problem: Problem, options: SolverOptions, init: dict[str, Any],
               monitor: RunMonitor) -> Iterator[IterateRecord]:
    """The one-layer problem (the paper's eq. 12): FISTA or Condat–Vũ (``make_block``)."""
    if problem.depth != 1:
        raise InputError(
            f"method 'pdhg' inverts a single layer, but '{problem.network.name}' has "
            f"{problem.depth} layers; use method 'joint' or 'layerwise'."
        )
    stop = monitor.stop
    x0 = init.get("x", problem.zeros_input())
    block = make_block(problem.network.layers[0], problem, options, x0, init.get("dual"), init,
                       tol_mode=stop.tol_mode)
    _describe_steps(monitor, block)
    yield from drive(OneLayer(block, problem, stop.residual_tol), monitor)


run_pdhg = functools.partial(run, "pdhg", _one_layer)


def _describe_steps(monitor: RunMonitor, block: Block) -> None:
    monitor.extras["steps"] = block.rule
    monitor.extras["tau_x"] = block.tau_x
    monitor.extras["tau_z"] = block.tau_z
    monitor.extras["lipschitz"] = block.lipschitz
    if block.warning:
        monitor.extras["warning"] = block.warning


def _record(
    monitor: RunMonitor, block: Block, problem: Problem, final: bool = False
) -> IterateRecord:
    monitor.warm = WarmStart(dual=block.z)
    if isinstance(block, AcceleratedBlock):
        monitor.extras["inner_steps"] = block.inner_steps  # TV passes beside the W products
        monitor.warm = WarmStart(block.z, *block.momentum_state)
    if problem.depth == 1 and (final or monitor.due()):
        monitor.watch.pause()  # reporting, not solving
        with torch.no_grad():
            monitor.extras["optimality"] = block.optimality(problem.y_delta)
    return monitor.record(block.x, [], final=final)
