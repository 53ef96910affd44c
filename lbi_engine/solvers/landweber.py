"""Landweber iteration with Morozov's discrepancy principle (the paper's baseline, MATH.md §6).

x <- x - tau J^T (sigma_L(z_L(x)) - y_delta), the gradient of B_{Psi_L}(y_delta, z_L(x)): for
one layer J^T = W^T and no derivative of sigma is needed; deeper networks differentiate the
pre-activation z_L(x) with autograd. Regularisation is by early stopping: stop at the first
iterate with ||sigma(f(x)) - y_delta|| <= eta * delta.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from lbi_engine.protocols import Network, Problem
from lbi_engine.settings.solver import SolverOptions
from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.base import IterateRecord, StopReason, relative_change
from lbi_engine.solvers.driver import Changes, Method, drive, run


def _pre_activation(network: Network, x: Tensor) -> Tensor:
    prev = x
    for layer in network.layers[:-1]:
        prev = layer.activation.sigma(layer.affine.apply(prev))
    return network.layers[-1].affine.apply(prev)


def landweber_gradient(network: Network, x: Tensor, y_delta: Tensor) -> tuple[Tensor, Tensor]:
    """(gradient, residual sigma_L(z_L) - y_delta) at x."""
    last = network.layers[-1]
    if len(network.layers) == 1:
        residual = last.activation.sigma(last.affine.apply(x)) - y_delta
        return last.affine.adjoint(residual), residual
    with torch.enable_grad():
        x_var = x.detach().requires_grad_(True)
        z = _pre_activation(network, x_var)
        residual = (last.activation.sigma(z) - y_delta).detach()
        (grad,) = torch.autograd.grad(z, x_var, grad_outputs=residual)
    return grad.detach(), residual


class Landweber(Method):
    """x <- x - tau J^T (sigma_L(z_L(x)) - y_delta); the gradient is taken in :meth:`check`,
    before the stop test, since its residual decides the discrepancy principle."""

    def __init__(self, problem: Problem, options: SolverOptions, x: Tensor) -> None:
        self.problem = problem
        self.network = problem.network
        # tau = 1/||W||^2 (classical scaling, MATH.md A5); a product of norms bounds J for L > 1.
        norm_sq = math.prod(float(layer.affine.norm()) ** 2 for layer in self.network.layers)
        self.tau = options.step_scale / max(norm_sq, 1e-30)
        self.eta = options.eta
        self.threshold = None if problem.delta is None else options.eta * problem.delta
        self.x = x
        self._grad: Tensor | None = None

    def state(self) -> tuple[Tensor, list[Tensor]]:
        return self.x, []

    def check(self, monitor: RunMonitor) -> None:
        """Gradient and residual at x; samples within eta * delta stop (DISCREPANCY)."""
        problem = self.problem
        self._grad, residual = landweber_gradient(self.network, self.x, problem.y_delta)
        if self.threshold is not None:
            norms = residual.reshape(problem.batch, -1).norm(dim=1)
            monitor.finish(norms <= self.threshold, StopReason.DISCREPANCY)

    def step(self, monitor: RunMonitor) -> Changes:
        x, grad = self.x, self._grad
        assert grad is not None  # check() ran before this step
        x_new = x - self.tau * grad
        (x_new,) = monitor.guard_finite([x_new], [x])
        x_new = monitor.freeze(x_new, x)
        dx = relative_change(x_new, x, monitor.stop.tol_mode)
        self.x = x_new
        return dx, None


def _landweber(problem: Problem, options: SolverOptions, init: dict[str, Any],
               monitor: RunMonitor) -> Iterator[IterateRecord]:
    method = Landweber(problem, options, init.get("x", problem.zeros_input()))
    monitor.extras.update(tau=method.tau, eta=options.eta)
    yield from drive(method, monitor)


run_landweber = functools.partial(run, "landweber", _landweber)
