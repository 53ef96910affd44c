"""Sequential layer-wise inversion (the paper's remark; MATH.md §5.5).

Stage l = L .. 2 solves  x_{l-1} = argmin_x B_{Psi_l}(x_l, W_l x + b_l) + a_{l-1} Psi_{l-1}(x)
(+ beta/2 ||x||^2) by FISTA, using the previous stage's estimate as data (x_L = y_delta);
the last stage solves the input problem with the user's regulariser by PDHG. Iteration
numbers continue across stages; each record names its stage.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor

from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.base import (
    CancelToken,
    IterateRecord,
    StopReason,
    StopRule,
    relative_change,
)
from lbi_engine.solvers.options import SolverOptions
from lbi_engine.solvers.pdhg import PrimalDualBlock


def _stage_prox(activation: object, v: Tensor, tau: float, weight: float, beta: float) -> Tensor:
    """prox of tau (weight Psi + beta/2 ||.||^2).

    Equals prox_{tau weight / (1 + tau beta) Psi}(v / (1 + tau beta)).
    """
    shrink = 1.0 + tau * beta
    t = tau * weight / shrink
    scaled = v / shrink
    if t <= 0:
        return activation.project(scaled)
    return activation.prox(scaled, t)


def _stage_objective(
    layer: object, prior: object, x: Tensor, data: Tensor, weight: float, beta: float
) -> Tensor:
    value = layer.activation.bregman(data, layer.affine.apply(x))
    if weight > 0:
        value = value + weight * prior.psi(x)
    if beta > 0:
        value = value + 0.5 * beta * x.reshape(x.shape[0], -1).pow(2).sum(dim=1)
    return value


def run_layerwise(
    problem: object,
    stop: StopRule,
    options: SolverOptions,
    init: dict | None,
    cancel: CancelToken | None,
    report_every: int,
) -> Iterator[IterateRecord]:
    layers = problem.network.layers
    depth = len(layers)
    init = init or {}
    monitor = RunMonitor(
        problem,
        "layerwise",
        stop,
        cancel,
        report_every,
        start_iteration=int(init.get("iteration", 0)),
    )
    # The stages share the run's iteration budget, so a run never exceeds max_iter in total
    # (unless inner_max_iter sets each stage's cap explicitly).
    per_stage = options.inner_max_iter or max(1, -(-stop.max_iter // problem.depth))
    stage_stop = StopRule(
        max_iter=per_stage,
        tol=stop.tol,
        tol_mode=stop.tol_mode,
        residual_tol=stop.residual_tol,
        time_budget=stop.time_budget,
        min_iter=stop.min_iter,
    )
    with torch.no_grad():
        x0 = init.get("x", problem.zeros_input())
        aux = list(init["aux"]) if init.get("aux") else problem.forward_aux(x0)
    data = problem.y_delta
    # Stages for the auxiliary variables, from the output down.
    for index in range(depth - 1, 0, -1):
        layer, prior = layers[index], layers[index - 1].activation
        weight = problem.layer_alpha(index)
        beta = options.layer_tikhonov
        tau = options.step_scale / max(float(layer.affine.norm()) ** 2, 1e-30)
        _start_stage(monitor, f"layer {index + 1}/{depth}", stage_stop)
        x = aux[index - 1]
        y, t_prev = x, 1.0

        def stage_record(
            x: Tensor, ctx: tuple = (index, layer, prior, data, weight, beta)
        ) -> IterateRecord:
            return _stage_record(monitor, problem, x0, aux, x, ctx)

        yield stage_record(x)
        monitor.watch.start()
        with torch.no_grad():
            while monitor.before_iteration():
                grad = layer.affine.adjoint(layer.activation.sigma(layer.affine.apply(y)) - data)
                x_new = _stage_prox(prior, y - tau * grad, tau, weight, beta)
                (x_new,) = monitor.guard_finite([x_new], [x])
                x_new = monitor.freeze(x_new, x)
                t_next = 0.5 * (1.0 + (1.0 + 4.0 * t_prev * t_prev) ** 0.5)
                y = x_new + ((t_prev - 1.0) / t_next) * (x_new - x)
                t_prev = t_next
                dx = relative_change(x_new, x, stop.tol_mode)
                x = x_new
                monitor.iteration += 1
                monitor.converged(dx)
                if monitor.running and monitor.due():
                    yield stage_record(x)
        monitor.watch.pause()
        aux[index - 1] = x
        data = x
        if _run_stopped(monitor):
            yield monitor.record(x0, aux, final=True)
            return
    # Input stage: the perceptron problem with the user's regulariser.
    _start_stage(monitor, f"layer 1/{depth}", stage_stop)
    block = PrimalDualBlock(layers[0], problem, options, x0, init.get("dual"))
    monitor.extras.update(tau_x=block.tau_x, tau_z=block.tau_z)

    def input_record(final: bool = False) -> IterateRecord:
        monitor.extras["dual"] = block.z
        return monitor.record(block.x, aux, final=final)

    yield input_record()
    monitor.watch.start()
    with torch.no_grad():
        while monitor.before_iteration():
            dx, dz = block.step(data, monitor)
            monitor.iteration += 1
            monitor.converged(dx, dz)
            if monitor.running and monitor.due():
                yield input_record()
    monitor.watch.pause()
    yield input_record(final=True)


def _stage_record(
    monitor: RunMonitor, problem: object, x0: Tensor, aux: list[Tensor], x: Tensor, ctx: tuple
) -> IterateRecord:
    """A record during an auxiliary stage: the stage's objective, its layer's Bregman term."""
    index, layer, prior, data, weight, beta = ctx
    value = _stage_objective(layer, prior, x, data, weight, beta)
    depth = problem.depth
    bregman = torch.full((problem.batch, depth), float("nan"), device=x.device, dtype=x.dtype)
    z = layer.affine.apply(x)
    bregman[:, index] = layer.activation.bregman(data, z)
    discrepancy = (layer.activation.sigma(z) - data).reshape(problem.batch, -1).norm(dim=1)
    parts = {
        "total": value,
        "bregman": bregman,
        "reg": value - bregman[:, index],
        "discrepancy": discrepancy,
    }
    return monitor.record(x0, aux[: index - 1] + [x] + aux[index:], parts=parts)


def _start_stage(monitor: RunMonitor, name: str, stop: StopRule) -> None:
    """Every sample runs again in the new stage; the iteration count continues."""
    monitor.stage = name
    monitor.stop = stop
    monitor.start_iteration = monitor.iteration
    monitor.active[:] = True
    monitor.reasons = [None] * len(monitor.reasons)
    monitor.first_objective = None


def _run_stopped(monitor: RunMonitor) -> bool:
    """Cancel, time budget or divergence in a stage ends the whole run."""
    fatal = {StopReason.CANCELLED.value, StopReason.TIME_BUDGET.value, StopReason.DIVERGED.value}
    return any(reason in fatal for reason in monitor.reasons)
