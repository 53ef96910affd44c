"""Accelerated proximal gradient (FISTA) with an inexact, warm-started TV prox, for one layer.

    y_k     = x_k + beta_k (x_k - x_{k-1})                       (Nesterov extrapolation)
    x_{k+1} ~ prox_{tau alpha TV}(y_k - tau grad f(y_k)),   tau = 1/L

Why this and not a primal-dual splitting: on the paper's problems a product with W costs far
more than a pass of the TV operators, and Condat–Vũ/PDHG needs 550–1,740 products to a 1e-4
objective gap where FISTA with an accurate prox needs 50–150 (benchmarks/NOTES.md).
Momentum only pays with an accurate prox: a fixed handful of warm-started inner steps made
FISTA stall at gaps of 1e-2 in the prototype. So the prox (a ROF denoising problem) is the TV
regulariser's own (``TotalVariation.fgp``: FGP warm-started from the last dual until its
duality gap is small relative to ||u - y_k||^2, lam = tau alpha; Villa, Salzo, Baldassarre &
Verri 2013; Bello-Cruz, Gonçalves & Krislock 2020). Momentum restarts
per sample when it points uphill (``operators.momentum``: the gradient scheme of
O'Donoghue & Candès 2015), which keeps the iteration close to monotone and gives the
linear rate near the solution.

One iteration = one product with W (at x_{k+1}) and one with W^T (at y_k): W y_k is the same
combination of the cached W x_k, W x_{k-1} as y_k is of x_k, x_{k-1}. The inner TV steps cost
no product with W; their number, summed over the samples, is reported (``inner_steps``).

Handles (isotropic or anisotropic) TV, with or without a box lo <= x <= hi (e.g. "tv+box",
the [0, 1] range of images: the prox is then constrained TV denoising, with the box inside
the FGP, Beck & Teboulle 2009), on a fixed data
term; every other case uses the Condat–Vũ block (see :func:`supported`). The dual variable
``z`` is the TV dual of the prox, on the scale of the Condat–Vũ block's (|z| <= 1,
grad f + alpha K^T z = 0 at the solution), so warm starts carry over between the two.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from lbi_engine.operators.finite_differences import zero_unused
from lbi_engine.operators.momentum import Momentum
from lbi_engine.protocols import Layer, Problem
from lbi_engine.regularisers import TotalVariation, TVProx
from lbi_engine.settings.solver import SolverOptions
from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.base import StopReason
from lbi_engine.solvers.one_layer.inplace import dense_matrix, dual_prox_plan, sigma_inplace

PRIMAL = 0.99  # tau = PRIMAL / L: FISTA needs tau <= 1/L, 1 % for power-iteration slack
_TINY = 1e-12


def supported(problem: Problem, options: SolverOptions, fixed_data: bool) -> bool:
    """Whether :class:`AcceleratedBlock` handles this run (else: Condat–Vũ).

    ``steps="auto"`` takes it only where the prox runs compiled (CPU with numba): its torch
    path costs ~0.3 ms per inner step on one 64x64 image, which made it slower in wall time
    than Condat–Vũ there although it needs far fewer products with W (NOTES.md).
    """
    inner = getattr(problem.reg, "inner", None)
    if options.steps == "auto" and not TVProx.compiles_on(problem.device):
        return False
    return (
        fixed_data
        and int(getattr(options, "anderson", 0)) == 0
        and isinstance(inner, TotalVariation)
        and float(problem.alpha) > 0
        and getattr(problem.reg, "image_shape", None) is not None
    )


class AcceleratedBlock:
    """FISTA state for one lifted layer (same interface as PrimalDualBlock)."""

    def __init__(
        self, layer: Layer, problem: Problem, options: SolverOptions, x: Tensor,
        z: Tensor | None = None, momentum: tuple[Tensor, Tensor] | None = None,
    ) -> None:
        """``momentum``: (x_{k-1}, [t_k; beta_k]) from :attr:`momentum_state` of an earlier
        run, so that a warm-started run continues the same iteration exactly."""
        self.affine, self.activation = layer.affine, layer.activation
        self.reg = problem.reg
        self.alpha = float(problem.alpha)
        self.lipschitz = float(self.affine.norm()) ** 2
        self.k_norm_sq = float(self.reg.K_norm_sq())
        self.tau_x = PRIMAL * options.step_scale / max(self.lipschitz, 1e-30)
        self.lam = self.tau_x * self.alpha
        self.tau_z = 1.0 / (self.lam * self.k_norm_sq)  # the FGP step on the prox's dual
        self.rule, self.warning = "accelerated", None
        self.use_dual = True
        self.batch = b = int(x.shape[0])
        self.steps_taken = 0
        self.inner_steps = 0
        self.image_shape = img = tuple(self.reg.image_shape)
        dtype, device = x.dtype, x.device
        self._cur = 0
        self._x = [x.detach().clone().contiguous(), x.detach().clone().contiguous()]
        inner = self.reg.inner
        if not isinstance(inner, TotalVariation):  # supported() admits TV only
            raise TypeError(f"the accelerated block handles TV, not {inner.name!r}")
        self._lo, self._hi = float(inner.lo), float(inner.hi)  # +-inf: no box
        self._boxed = inner.constrained
        # the TV prox (compiled on the CPU where numba runs) on buffers it owns: v, y, u
        # are views of them with x's shape, ``_pp`` its working dual
        self._prox = inner.fgp(b, img, x)
        self._v, self._y, self._u = (t.view(x.shape) for t in
                                     (self._prox.v, self._prox.y, self._prox.u))
        self._pp = self._prox.dual
        self._d = torch.empty_like(self._x[0])
        field = (b, 2, *img)
        self._p = torch.zeros(field, dtype=dtype, device=device)
        if z is not None:
            self._p.copy_(z.reshape(field))
        dual_prox_plan(inner, self._p)(0.0, self.alpha)  # a warm start inside the ball
        zero_unused(self._p, img)
        # FISTA's t_k and the extrapolation coefficient beta per sample (``operators.momentum``)
        self._rule = Momentum(b, x, None if momentum is None else momentum[1])
        self._beta = self._rule.coef
        if momentum is not None:
            self._x[1].copy_(momentum[0].reshape(x.shape))
        self._beta_x = self._beta.view(-1, *([1] * (x.dim() - 1)))
        self._sigma_ = sigma_inplace(self.activation)
        self._dense = dense_matrix(self.affine)
        self._data: Tensor | None = None
        with torch.no_grad():
            a0 = self._forward(self._x[0])
            a1 = a0.clone() if momentum is None else self._forward(self._x[1])
        self._a = [a0, a1]
        self._ay = torch.empty_like(a0)
        self._beta_a = self._beta.view(-1, *([1] * (a0.dim() - 1)))

    # -- interface shared with PrimalDualBlock ----------------------------------------------------
    @property
    def x(self) -> Tensor:
        return self._x[self._cur]

    @property
    def z(self) -> Tensor:
        return self._p

    @property
    def momentum_state(self) -> tuple[Tensor, Tensor]:
        """(x_{k-1}, [t_k; beta_k]): with x and z the complete state (live buffers)."""
        return self._x[1 - self._cur], self._rule.state

    def _forward(self, x: Tensor) -> Tensor:
        if self._dense is not None:
            weight, bias = self._dense
            flat = x.reshape(x.shape[0], -1)
            return flat @ weight.t() if bias is None else torch.addmm(bias, flat, weight.t())
        return self.affine.apply(x)

    def _forward_into(self, x: Tensor, out: Tensor) -> None:
        if self._dense is not None:
            weight, bias = self._dense
            flat = x.view(x.shape[0], -1)
            if bias is None:
                torch.mm(flat, weight.t(), out=out)
            else:
                torch.addmm(bias, flat, weight.t(), out=out)
        else:
            out.copy_(self.affine.apply(x))

    def step(self, data: Tensor, monitor: RunMonitor) -> tuple[Tensor, Tensor]:
        """One FISTA iteration; returns the per-sample changes of x and of the TV dual."""
        cur, nxt = self._cur, 1 - self._cur
        x, x_old, y = self._x[cur], self._x[nxt], self._y
        a, a_old, ay = self._a[cur], self._a[nxt], self._ay
        # y = x + beta (x - x_old), and W y + b from the cached pre-activations
        torch.sub(x, x_old, out=y)
        y.mul_(self._beta_x).add_(x)
        torch.sub(a, a_old, out=ay)
        ay.mul_(self._beta_a).add_(a)
        self._sigma_(ay)
        if data is not self._data:
            self._data, self._data_flat = data, data.reshape(ay.shape)
        ay.sub_(self._data_flat)
        v = self._v
        if self._dense is not None:
            torch.addmm(y.view(y.shape[0], -1), ay, self._dense[0], alpha=-self.tau_x,
                        out=v.view(v.shape[0], -1))
        else:
            torch.add(y, self.affine.adjoint(ay).reshape(y.shape), alpha=-self.tau_x, out=v)
        self._pp.copy_(self._p)
        self.inner_steps += self._prox(self.lam, None if monitor.all_active else monitor.active)
        x_new, a_new = x_old, a_old  # slot nxt receives the new iterate
        x_new.copy_(self._u)
        self._forward_into(x_new, a_new)
        self._momentum(x, x_new)
        changes = self._changes(monitor, cur, nxt)
        self._cur = nxt
        self.steps_taken += 1
        return changes

    # -- momentum, changes, freezing ------------------------------------------------------------
    def _momentum(self, x: Tensor, x_new: Tensor) -> None:
        """beta for the next extrapolation, restarted where the step x_new - x points
        against y - x_new (O'Donoghue & Candès' gradient test)."""
        batch = self.batch
        torch.sub(self._y, x_new, out=self._d)
        self._rule.advance(torch.linalg.vecdot(self._d.view(batch, -1),
                                               (x_new - x).view(batch, -1)) > 0)

    def _changes(self, monitor: RunMonitor, cur: int, nxt: int) -> tuple[Tensor, Tensor]:
        """Relative changes of x and the dual; non-finite samples stop (DIVERGED) and, like
        stopped samples, keep their previous state."""
        batch = self.batch
        x_new, x_old = self._x[nxt], self._x[cur]
        nx = torch.linalg.vector_norm(x_new.view(batch, -1), dim=1)
        dxn = torch.linalg.vector_norm((x_new - x_old).view(batch, -1), dim=1)
        nz = torch.linalg.vector_norm(self._pp.view(batch, -1), dim=1)
        dzn = torch.linalg.vector_norm((self._pp - self._p).view(batch, -1), dim=1)
        if not math.isfinite(float(nx.sum() + dxn.sum() + nz.sum() + dzn.sum())):
            finite = torch.isfinite(nx) & torch.isfinite(dxn) & torch.isfinite(nz) & \
                torch.isfinite(dzn)
            monitor.finish(~finite, StopReason.DIVERGED)
        if not monitor.all_active:
            self._freeze(monitor.active, cur, nxt)
        else:
            self._p.copy_(self._pp)
        relative = monitor.stop.tol_mode != "absolute"
        if relative:
            dxn, dzn = dxn / nx.clamp_min(_TINY), dzn / nz.clamp_min(_TINY)
        if not monitor.all_active:
            zero = torch.zeros((), dtype=dxn.dtype, device=dxn.device)
            dxn = torch.where(monitor.active, dxn, zero)
            dzn = torch.where(monitor.active, dzn, zero)
        return dxn, dzn

    def _freeze(self, active: Tensor, cur: int, nxt: int) -> None:
        """Stopped samples keep x, W x + b and the dual; no extrapolation (beta = 0)."""
        def keep(t: Tensor) -> Tensor:
            return active.view(-1, *([1] * (t.dim() - 1)))

        for new, old in ((self._x[nxt], self._x[cur]), (self._a[nxt], self._a[cur])):
            torch.where(keep(new), new, old, out=new)
        torch.where(keep(self._p), self._pp, self._p, out=self._p)
        self._beta.masked_fill_(~active, 0.0)

    # -- diagnostics ------------------------------------------------------------------------------
    def optimality(self, data: Tensor) -> Tensor:
        """Per-sample ||x - P_box(x - tau (grad f(x) + alpha K^T z))|| / tau, relative to
        ||grad f(x)|| (0 exactly at a solution with its TV dual; without a box it is
        ||grad f + alpha K^T z||, as PrimalDualBlock.optimality)."""
        x = self.x
        grad_f = self.affine.adjoint(self.activation.sigma(self.affine.apply(x)) - data)
        grad = grad_f.reshape(x.shape) + self.alpha * self.reg.KT(self._p)
        batch = x.shape[0]
        if self._boxed:
            moved = (x - self.tau_x * grad).clamp(
                min=self._lo if self._lo > -math.inf else None,
                max=self._hi if self._hi < math.inf else None)
            grad = (x - moved) / self.tau_x
        res = grad.reshape(batch, -1).norm(dim=1)
        return res / grad_f.reshape(batch, -1).norm(dim=1).clamp_min(1e-12)
