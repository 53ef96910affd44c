"""Backpropagation baseline (Mahendran & Vedaldi): min_x 1/2 ||N(x) - y_delta||^2 + alpha R(x).

Gradients flow through the network with autograd, so the activations' derivatives are used
(unlike the lifted methods). The non-smooth dual part of R is replaced by its Moreau
envelope of parameter ``tv_smoothing`` (Huber-TV for TV), whose gradient is K^T p* with
p* = prox_{h*/eps}(K x / eps); the primal part g (l1, box, ...) is applied as a proximal
step after each update.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor

from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.base import CancelToken, IterateRecord, StopRule, relative_change
from lbi_engine.solvers.options import SolverOptions


def smoothed_reg_gradient(reg: object, x: Tensor, alpha: float, eps: float) -> Tensor:
    """Gradient of alpha R_eps(x), the Moreau envelope of the dual part (Danskin)."""
    if not reg.has_dual or alpha <= 0:
        return torch.zeros_like(x)
    # h(alpha K x) = alpha R_h(x); with u = K x, R_h(x) = h_1(u) where h_1 is h at alpha = 1.
    p_star = reg.prox_dual(reg.K(x) / eps, 1.0 / eps, 1.0)
    return alpha * reg.KT(p_star)


def run_backprop(
    problem: object,
    stop: StopRule,
    options: SolverOptions,
    init: dict | None,
    cancel: CancelToken | None,
    report_every: int,
) -> Iterator[IterateRecord]:
    network, reg, alpha = problem.network, problem.reg, problem.alpha
    init = init or {}
    monitor = RunMonitor(
        problem,
        "backprop",
        stop,
        cancel,
        report_every,
        start_iteration=int(init.get("iteration", 0)),
    )
    x = init.get("x", problem.zeros_input()).detach().clone().requires_grad_(True)
    lr = options.lr * options.step_scale  # step_scale multiplies every method's primal step
    if options.optimizer == "adam":
        optimiser = torch.optim.Adam([x], lr=lr)
    else:
        optimiser = torch.optim.SGD([x], lr=lr)
    monitor.extras.update(optimizer=options.optimizer, lr=lr)
    # A copy: x is updated in place by the optimiser, and a record must be a snapshot.
    yield monitor.record(x.detach().clone(), [])
    monitor.watch.start()
    while monitor.before_iteration():
        old = x.detach().clone()
        optimiser.zero_grad(set_to_none=True)
        with torch.enable_grad():
            loss = 0.5 * (network.forward(x) - problem.y_delta).pow(2).sum()
            (grad,) = torch.autograd.grad(loss, x)
        with torch.no_grad():
            grad = grad + smoothed_reg_gradient(reg, x.detach(), alpha, options.tv_smoothing)
            x.grad = grad * problem_active_mask(monitor, grad)
            optimiser.step()
            x.copy_(reg.prox_primal(x, lr, alpha))
            (fixed,) = monitor.guard_finite([x.detach()], [old])
            x.copy_(monitor.freeze(fixed, old))
        dx = relative_change(x.detach(), old, stop.tol_mode)
        monitor.iteration += 1
        monitor.converged(dx)
        if monitor.running and monitor.due():
            yield monitor.record(x.detach().clone(), [])
    monitor.watch.pause()
    yield monitor.record(x.detach().clone(), [], final=True)


def problem_active_mask(monitor: RunMonitor, like: Tensor) -> Tensor:
    """1 for running samples, 0 for stopped ones (Adam keeps no per-sample state otherwise)."""
    return monitor.active.reshape(-1, *([1] * (like.dim() - 1))).to(like.dtype)
