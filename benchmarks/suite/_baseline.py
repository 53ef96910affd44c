"""A straightforward torch port of the paper's iteration: the "before" of the hot-path work.

This is the PDHG step as the engine first implemented it (git history: lbi_engine/solvers/
one_layer/method.py, PrimalDualBlock.step before the performance work), written against the public
operator and regulariser APIs: every operation allocates its result, TV's grad/div are built
from diff/pad/stack, the per-sample changes and the finiteness check run every iteration, and
the run monitor's bookkeeping (stop test, freeze) is the original one. Timing it next to the
engine in the same run gives the speed-up of the optimisations under the same load.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from lbi_engine.solvers.base import all_finite, relative_change
from lbi_engine.solvers.one_layer.step_sizes import step_sizes


class StraightforwardPDHG:
    """x+ = prox(x - tau_x (W^T(sigma(Wx+b) - y) + alpha K^T z)), z+ = Pi(z + ...)."""

    def __init__(self, problem: Any, rule: str = "safe") -> None:
        layer = problem.network.layers[0]
        self.affine, self.activation = layer.affine, layer.activation
        self.reg, self.alpha = problem.reg, float(problem.alpha)
        self.data = problem.y_delta
        lipschitz = float(self.affine.norm()) ** 2
        self.tau_x, self.tau_z = step_sizes(rule, lipschitz, self.alpha, self.reg.K_norm_sq())
        self.x = problem.zeros_input()
        self.z = torch.zeros_like(self.reg.K(self.x))
        self.active = torch.ones(problem.batch, dtype=torch.bool)
        self.tol = 1e-30

    def step(self) -> tuple[Tensor, Tensor]:
        x, z = self.x, self.z
        residual = self.activation.sigma(self.affine.apply(x)) - self.data
        grad = self.affine.adjoint(residual) + self.alpha * self.reg.KT(z)
        x_new = self.reg.prox_primal(x - self.tau_x * grad, self.tau_x, self.alpha)
        extrapolated = self.reg.K(2.0 * x_new - x)
        z_new = self.reg.prox_dual(z + (self.tau_z * self.alpha) * extrapolated, self.tau_z,
                                   self.alpha)
        finite = all_finite(x_new, z_new)  # the original guard_finite
        if not bool(finite.all()):
            x_new = torch.where(finite.view(-1, *[1] * (x.dim() - 1)), x_new, x)
        if not bool(self.active.all()):  # the original freeze
            x_new = torch.where(self.active.view(-1, *[1] * (x.dim() - 1)), x_new, x)
        dz = relative_change(z_new, z)
        dx = relative_change(x_new, x)
        small = (dx < self.tol) & (dz < self.tol)  # the original converged()
        mask = small & self.active
        if bool(mask.any()):
            self.active &= ~mask
        self.x, self.z = x_new, z_new
        return dx, dz
