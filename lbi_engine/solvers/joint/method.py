"""Joint multi-layer inversion of the lifted objective (paper eqs. 13–15; MATH.md §5.3–5.4).

Default (``steps="auto"``/``"accelerated"``, TV with or without box or the learned Gaussian
input prior, ``n_inner=1``): an accelerated
proximal gradient step on all blocks at once (``solvers/joint/fista.py``), 5-10x fewer steps than
the paper's sweeps at the same cost per step. Otherwise the paper's coordinate descent: each
sweep ``n_inner`` PDHG steps on x_0 against x_1, then one proximal-gradient step on each
auxiliary variable x_1 .. x_{L-1} in Gauss–Seidel order (new x_{l-1}, old x_{l+1}).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import Tensor

from lbi_engine.errors import InputError
from lbi_engine.protocols import Layer, Problem
from lbi_engine.settings.solver import SolverOptions
from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.base import IterateRecord, WarmStart, relative_change
from lbi_engine.solvers.driver import Changes, Method, drive, run
from lbi_engine.solvers.joint import fista as _accel
from lbi_engine.solvers.joint import start as _start
from lbi_engine.solvers.one_layer.method import PAPER_PRIMAL, BlockMethod, PrimalDualBlock


def graph_refusal(what: str) -> str:
    """The one line that refuses a method on a network with residual additions or
    concatenation (MATH.md §5.6: only the joint method's accelerated step is graph-aware)."""
    return (f"{what} runs on chains of layers only, and this network adds or concatenates "
            "tensors (a residual or concatenating graph); use method 'joint' (its accelerated "
            "step: TV regulariser without box, steps 'auto', n_inner 1, no Anderson), "
            "'layerwise' (with a feature prior: lbi feature-prior) or 'backprop'.")


# Any tau_l < 2/||W_{l+1}||^2 makes the x_l step non-increasing (descent lemma, MATH.md §5.3).
AUX_SAFE = 1.9


def aux_step(
    layers: Sequence[Layer],
    index: int,
    aux: list[Tensor],
    below: Tensor,
    above: Tensor,
    tau: float,
    pre_next: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The x_l update of MATH.md §5.3 (l = index + 1); returns (new x_l, u).

    ``below`` is the new x_{l-1}, ``above`` the old x_{l+1} (y_delta for the last one).
    ``u = W_l x_{l-1} + b_l`` at the new x_{l-1} is also the pre-activation the next sweep
    needs for layer l, so the caller caches it; ``pre_next`` is W_{l+1} x_l + b_{l+1} at
    the current x_l when already known (computed as ``u`` by the previous sweep).
    """
    own, nxt = layers[index], layers[index + 1]
    x_l = aux[index]
    u = own.affine.apply(below)  # W_l x_{l-1} + b_l
    z_next = nxt.affine.apply(x_l) if pre_next is None else pre_next
    g = nxt.affine.adjoint(nxt.activation.sigma(z_next) - above)
    v = (x_l - tau * (g - u)) / (1.0 + tau)
    return own.activation.prox(v, tau / (1.0 + tau)), u


def _joint(problem: Problem, options: SolverOptions, init: dict[str, Any],
           monitor: RunMonitor) -> Iterator[IterateRecord]:
    layers = problem.network.layers
    with torch.no_grad():
        x0 = init.get("x", problem.zeros_input())
        aux = list(init["aux"]) if init.get("aux") else problem.forward_aux(x0)
        aux = [layers[i].activation.project(a) for i, a in enumerate(aux)]
    if _accel.supported(problem, options):
        if "x" not in init:
            x0, aux = accelerated_start(problem)
        yield from _run_accelerated(problem, monitor, x0, aux, init, options)
        return
    if not getattr(problem.network, "is_chain", True):
        raise InputError(graph_refusal("the joint method's coordinate descent (steps "
                                       f"{options.steps!r}, n_inner {options.n_inner}, "
                                       f"anderson {options.anderson}, regulariser "
                                       f"{getattr(problem.reg, 'name', '?')!r})"))
    method = CoordinateDescent(problem, options, x0, aux, init.get("dual"))
    block = method.block
    monitor.extras.update(tau_x=block.tau_x, tau_z=block.tau_z, tau_aux=method.taus)
    if block.warning:
        monitor.extras["warning"] = block.warning
    yield from drive(method, monitor)


run_joint = functools.partial(run, "joint", _joint)


class CoordinateDescent(BlockMethod):
    """The paper's sweeps: ``n_inner`` PDHG steps on x_0 against x_1 (the block's in-place
    step), then one proximal-gradient step on each x_l in Gauss–Seidel order. Records and
    state as BlockMethod's: x_0 from the block, the dual in extras, the aux variables."""

    block: PrimalDualBlock  # never the accelerated block: x_0's data changes every sweep

    def __init__(self, problem: Problem, options: SolverOptions, x0: Tensor, aux: list[Tensor],
                 dual: Tensor | None) -> None:
        self.problem = problem
        self.layers = layers = problem.network.layers
        self.depth = depth = len(layers)
        self.n_inner = options.n_inner
        block = PrimalDualBlock(layers[0], problem, options, x0, dual, fixed_data=depth == 1)
        super().__init__(block, problem.y_delta, aux)
        factor = PAPER_PRIMAL if options.steps == "paper" else AUX_SAFE
        self.taus = [
            options.step_scale * factor / max(float(layers[i + 1].affine.norm()) ** 2, 1e-30)
            for i in range(depth - 1)
        ]
        # pre[i] = W_i x_{i-1} + b_i at the current x_{i-1}, or None: each sweep then needs
        # one forward and one adjoint per layer (the floor), not two forwards
        self.pre: list[Tensor | None] = [None] * depth

    def step(self, monitor: RunMonitor) -> Changes:
        block, layers, depth, pre, aux = self.block, self.layers, self.depth, self.pre, self.aux
        y_delta, tol_mode = self.problem.y_delta, monitor.stop.tol_mode
        data = aux[0] if depth > 1 else y_delta
        if self.n_inner == 1:
            dx, dz = block.step(data, monitor, pre=pre[0])
        else:  # the block's slots are reused: keep the state before the sweep
            x_before = block.x.clone()
            z_before = block.z.clone() if block.z is not None else None
            for k in range(self.n_inner):
                block.step(data, monitor, pre=pre[0] if k == 0 else None)
            dx = relative_change(block.x, x_before, tol_mode)
            z_after = block.z
            dz = (relative_change(z_after, z_before, tol_mode)
                  if z_after is not None and z_before is not None else None)
        below = block.x
        new_aux = list(aux)
        for index in range(depth - 1):
            above = aux[index + 1] if index + 1 < depth - 1 else y_delta
            candidate, pre[index] = aux_step(layers, index, new_aux, below, above,
                                             self.taus[index], pre[index + 1])
            candidate, change = monitor.accept(candidate, aux[index])
            dz = change if dz is None else torch.maximum(dz, change)
            new_aux[index] = candidate
            below = candidate
        pre[depth - 1] = None  # the last layer's input x_{L-1} just changed
        if depth > 1 and not monitor.all_active:
            pre[0] = None  # frozen samples: recompute rather than trust the cache
        self.aux = new_aux
        return dx, dz


def accelerated_start(problem: Problem) -> tuple[Tensor, list[Tensor]]:
    """The accelerated method's cold start (x_0, [x_1 .. x_{L-1}]): a cheap one, the scaled
    back-projection of the code and its forward states."""
    with torch.no_grad():
        x0 = _start.backprojection_start(problem)
        return x0, problem.forward_aux(x0)


def _run_accelerated(problem: Problem, monitor: RunMonitor, x0: Tensor, aux: list[Tensor],
                     init: dict[str, Any], options: SolverOptions) -> Iterator[IterateRecord]:
    warm = WarmStart(init.get("dual"), init.get("x_prev"), init.get("momentum"))
    method = AcceleratedJoint(problem, x0, aux, options, monitor.stop.tol_mode, warm)
    monitor.extras.update(steps="accelerated", tau_x=method.fista.taus[0],
                          tau_aux=method.fista.taus[1:])
    yield from drive(method, monitor)


class AcceleratedJoint(Method):
    """The all-block FISTA of ``fista.JointFista`` on the driver."""

    def __init__(self, problem: Problem, x0: Tensor, aux: list[Tensor], options: SolverOptions,
                 tol_mode: str, warm: WarmStart | None = None) -> None:
        self.fista = _accel.JointFista(problem, [x0, *aux], options.step_scale, warm=warm,
                                       tol_mode=tol_mode)

    def step(self, monitor: RunMonitor) -> Changes:
        return self.fista.step(monitor)

    def state(self) -> tuple[Tensor, list[Tensor]]:
        xs = self.fista.xs
        return xs[0], xs[1:]

    def objective_parts(self) -> dict[str, Tensor]:
        return self.fista.objective_parts()

    def record(self, monitor: RunMonitor, final: bool = False) -> IterateRecord:
        state = self.fista
        if not state.measures_change:
            monitor.note_change(state.last_change())
        monitor.warm = state.warm_state()
        monitor.extras["restarts"] = state.restarts
        return super().record(monitor, final)
