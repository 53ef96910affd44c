"""The Condat–Vũ iteration on one lifted layer, allocation-free (MATH.md §3.2–3.3).

    x+ = prox_{tau_x g}(x - tau_x (W^T (sigma(W x + b) - data) + alpha K^T z))
    z+ = prox_{tau_z h*}(z + tau_z alpha K (2 x+ - x))

Shared by PDHG (data = y_delta) and the x_0 block of the joint method (data = x_1).

Why it looks the way it does: on the paper's problems the two products with W cost about
0.5 ms and everything else is a dozen operations on a few thousand pixels, where each torch
call costs as much as its arithmetic. So the state lives in two preallocated slots (old/new,
swapped every step), each update writes into its buffer in place through views prepared once
(see ``_inplace.py`` and ``finite_differences.GradInto``/``DivAdd``), the products with W
are single ``addmm`` calls that also fold in the bias and the gradient step, and the
convergence and finiteness checks reuse two norms per variable. Measured effect and the
floor it is compared against: benchmarks/RESULTS.md.

The tensors ``x`` and ``z`` are the live slots: they are overwritten two steps later, so
callers that keep them must clone (the run monitor's records do).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from lbi_engine.finite_differences import DivAdd, GradInto, zero_unused
from lbi_engine.regularisers import GradientTikhonov, TotalVariation
from lbi_engine.solvers._inplace import (
    dense_matrix,
    dual_prox_plan,
    primal_prox_plan,
    sigma_inplace,
)
from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.base import StopReason
from lbi_engine.solvers.options import SolverOptions
from lbi_engine.solvers.steps import StepController, paper_steps_warning, step_sizes

_TINY = 1e-12  # denominator floor of the relative change (as base.relative_change)


class PrimalDualBlock:
    """One Condat–Vũ iteration on x for a single lifted layer and the problem's regulariser."""

    def __init__(
        self,
        layer: object,
        problem: object,
        options: SolverOptions,
        x: Tensor,
        z: Tensor | None = None,
    ) -> None:
        self.affine = layer.affine
        self.activation = layer.activation
        self.reg = problem.reg
        self.alpha = float(problem.alpha)
        self.tol_mode = "relative"
        self.lipschitz = float(self.affine.norm()) ** 2
        self.use_dual = bool(self.reg.has_dual) and self.alpha > 0
        k_norm_sq = self.reg.K_norm_sq() if self.use_dual else 0.0
        self.tau_x, self.tau_z = step_sizes(options.steps, self.lipschitz, self.alpha, k_norm_sq)
        self.tau_x *= options.step_scale
        self.warning = (
            paper_steps_warning(self.lipschitz, self.alpha, k_norm_sq)
            if options.steps == "paper"
            else None
        )
        self.controller = StepController.create(options, self, k_norm_sq)
        self.batch = int(x.shape[0])
        self.steps_taken = 0
        self._build_state(x, z)
        self._build_plans()

    # -- state ---------------------------------------------------------------------------------
    @property
    def x(self) -> Tensor:
        return self._x[self._cur]

    @property
    def z(self) -> Tensor | None:
        return self._z[self._cur] if self.use_dual else None

    def _build_state(self, x: Tensor, z: Tensor | None) -> None:
        def slot(t: Tensor) -> Tensor:
            return torch.empty(t.shape, dtype=t.dtype, device=t.device)

        self._cur = 0
        self._x = [slot(x), slot(x)]
        self._x[0].copy_(x)
        self._dx = slot(x)
        if not self.use_dual:
            self._z = None
            return
        inner = getattr(self.reg, "inner", None)
        self.image_shape = tuple(getattr(self.reg, "image_shape", x.shape[1:]))
        self._fast_k = isinstance(inner, (TotalVariation, GradientTikhonov))
        shape = tuple(self.reg.K(x[:1]).shape[1:]) if not self._fast_k else (
            2, *self.image_shape)
        zeros = torch.zeros((self.batch, *shape), dtype=x.dtype, device=x.device)
        self._z = [zeros, zeros.clone()]
        if z is not None:
            self._z[0].copy_(z.reshape(self._z[0].shape))
            if self._fast_k:
                # entries grad never writes: div ignores them, the flat DivAdd needs them 0
                zero_unused(self._z[0], self.image_shape)
        self._dz = zeros.clone()
        self._xbar = slot(x)

    def _build_plans(self) -> None:
        inner = getattr(self.reg, "inner", self.reg)
        image = getattr(self.reg, "image_shape", None)
        self._sigma_ = sigma_inplace(self.activation)
        dense = dense_matrix(self.affine)
        self._gemm = None
        if dense is not None:
            weight, bias = dense
            x = self._x[0]
            self._gemm = (weight, weight.t(), bias)
            self._a = torch.empty(self.batch, weight.shape[0], dtype=x.dtype, device=x.device)
            self._xf = [t.view(self.batch, -1) for t in self._x]
        self._prox_x = [primal_prox_plan(inner, _img(t, image)) for t in self._x]
        if not self.use_dual:
            return
        self._prox_z = [dual_prox_plan(inner, t) for t in self._z]
        if self._fast_k:
            img = self.image_shape
            self._div_add = [DivAdd(self._z[k], self._x[1 - k], img) for k in (0, 1)]
            self._grad_into = [GradInto(self._xbar, self._z[k], img) for k in (0, 1)]

    # -- the iteration ---------------------------------------------------------------------------
    def step(self, data: Tensor, monitor: RunMonitor) -> tuple[Tensor, Tensor | None]:
        """One iteration; returns the per-sample changes of x and z (StopRule.tol_mode)."""
        cur, nxt = self._cur, 1 - self._cur
        x_old, x_new = self._x[cur], self._x[nxt]
        tau_x, alpha = self.tau_x, self.alpha
        if self._gemm is not None:
            weight, weight_t, bias = self._gemm
            a, xo = self._a, self._xf[cur]
            if bias is None:
                torch.mm(xo, weight_t, out=a)
            else:
                torch.addmm(bias, xo, weight_t, out=a)
            self._sigma_(a)
            a.sub_(data.reshape(a.shape))
            torch.addmm(xo, a, weight, alpha=-tau_x, out=self._xf[nxt])
        else:
            residual = self.activation.sigma(self.affine.apply(x_old)) - data
            torch.add(x_old, self.affine.adjoint(residual), alpha=-tau_x, out=x_new)
        if self.use_dual:  # - tau_x alpha K^T z = + tau_x alpha div z
            if self._fast_k:
                self._div_add[cur](tau_x * alpha)
            else:
                x_new.sub_(self.reg.KT(self._z[cur]), alpha=tau_x * alpha)
        prox_x = self._prox_x[nxt]
        if prox_x is not None:
            prox_x(tau_x, alpha)
        dx = torch.sub(x_new, x_old, out=self._dx)
        dz = self._dual_step(cur, nxt, dx) if self.use_dual else None
        changes = self._changes(monitor, cur, nxt, dx, dz)
        self._cur = nxt
        self.steps_taken += 1
        if self.controller is not None:
            self.controller.after_step(self)
        return changes

    def _dual_step(self, cur: int, nxt: int, dx: Tensor) -> Tensor:
        z_old, z_new = self._z[cur], self._z[nxt]
        xbar = torch.add(self._x[nxt], dx, out=self._xbar)  # 2 x+ - x
        scale = self.tau_z * self.alpha
        if self._fast_k:
            self._grad_into[nxt]()
            torch.add(z_old, z_new, alpha=scale, out=z_new)
        else:
            torch.add(z_old, self.reg.K(xbar), alpha=scale, out=z_new)
        self._prox_z[nxt](self.tau_z, self.alpha)
        return torch.sub(z_new, z_old, out=self._dz)

    def _changes(
        self, monitor: RunMonitor, cur: int, nxt: int, dx: Tensor, dz: Tensor | None
    ) -> tuple[Tensor, Tensor | None]:
        """Per-sample changes; non-finite samples are stopped (DIVERGED) and, like samples
        that stopped earlier, keep their previous iterate (change 0)."""
        batch = self.batch
        dxn = torch.linalg.vector_norm(dx.view(batch, -1), dim=1)
        dzn = torch.linalg.vector_norm(dz.view(batch, -1), dim=1) if dz is not None else None
        # ||new - old|| is finite iff new is (old is finite), so the norms are the guard
        total = dxn if dzn is None else dxn + dzn
        finite = torch.isfinite(total)
        if not bool(finite.all()):
            monitor.finish(~finite, StopReason.DIVERGED)
        if monitor.stop.tol_mode != "absolute":
            dxn = dxn / torch.linalg.vector_norm(
                self._x[nxt].view(batch, -1), dim=1).clamp_min(_TINY)
            if dzn is not None:
                dzn = dzn / torch.linalg.vector_norm(
                    self._z[nxt].view(batch, -1), dim=1).clamp_min(_TINY)
        if not monitor.all_active:
            self._freeze(monitor.active, cur, nxt)
            zero = torch.zeros((), dtype=dxn.dtype, device=dxn.device)
            dxn = torch.where(monitor.active, dxn, zero)
            dzn = None if dzn is None else torch.where(monitor.active, dzn, zero)
        return dxn, dzn

    def _freeze(self, active: Tensor, cur: int, nxt: int) -> None:
        """Stopped samples keep their previous iterate."""
        pairs = [(self._x[nxt], self._x[cur])]
        if self.use_dual:
            pairs.append((self._z[nxt], self._z[cur]))
        for new, old in pairs:
            keep = active.view(-1, *([1] * (new.dim() - 1)))
            torch.where(keep, new, old, out=new)

    # -- diagnostics -----------------------------------------------------------------------------
    def optimality(self, data: Tensor) -> Tensor:
        """Per-sample fixed-point residual ||x - prox(x - tau(grad f + alpha K^T z))|| / tau,
        relative to ||grad f||: zero exactly at a saddle point."""
        x = self.x
        grad_f = self.affine.adjoint(self.activation.sigma(self.affine.apply(x)) - data)
        grad = grad_f + self.alpha * self.reg.KT(self.z) if self.use_dual else grad_f
        moved = self.reg.prox_primal(x - self.tau_x * grad, self.tau_x, self.alpha)
        batch = x.shape[0]
        res = (x - moved).reshape(batch, -1).norm(dim=1) / self.tau_x
        return res / grad_f.reshape(batch, -1).norm(dim=1).clamp_min(1e-12)


def _img(x: Tensor, image_shape: tuple[int, ...] | None) -> Tensor:
    """x viewed with the regulariser's image shape (for the generic primal prox)."""
    if image_shape is None or math.prod(image_shape) != math.prod(x.shape[1:]):
        return x
    return x.view(x.shape[0], *image_shape)
