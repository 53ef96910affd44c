"""Accelerated proximal gradient (FISTA) with an inexact, warm-started TV prox, for one layer.

    y_k     = x_k + beta_k (x_k - x_{k-1})                       (Nesterov extrapolation)
    x_{k+1} ~ prox_{tau alpha TV}(y_k - tau grad f(y_k)),   tau = 1/L

Why this and not a primal-dual splitting: on the paper's problems a product with W costs far
more than a pass of the TV operators, and Condat–Vũ/PDHG needs 550–1,740 products to a 1e-4
objective gap where FISTA with an accurate prox needs 50–150 (benchmarks/NOTES.md, issue #7).
Momentum only pays with an accurate prox: a fixed handful of warm-started inner steps made
FISTA stall at gaps of 1e-2 in the prototype. So the prox (a ROF denoising problem) is solved
by FGP (Beck & Teboulle 2009: accelerated projected gradient on its dual, warm-started from
the last dual) until its duality gap

    gap = lam (TV(u) - <grad u, p>)  <=  THETA * 0.5 ||u - y_k||^2,   lam = tau alpha,

a relative-error criterion of the kind under which inexact accelerated proximal gradient
keeps its rate (Villa, Salzo, Baldassarre & Verri 2013; Bello-Cruz, Gonçalves & Krislock
2020), with the gap floored at rounding level so float32 runs do not spin. Momentum restarts
per sample when it points uphill (gradient scheme of O'Donoghue & Candès 2015), which keeps
the iteration close to monotone and gives the linear rate near the solution.

One iteration = one product with W (at x_{k+1}) and one with W^T (at y_k): W y_k is the same
combination of the cached W x_k, W x_{k-1} as y_k is of x_k, x_{k-1}. The inner TV steps cost
no product with W; their number, summed over the samples, is reported (``inner_steps``).

Handles (isotropic or anisotropic) TV, with or without a box lo <= x <= hi (e.g. "tv+box",
the [0, 1] range of images: the prox is then constrained TV denoising, FGP with u = clip(v +
lam div p), Beck & Teboulle 2009, and its duality gap keeps the same formula), on a fixed data
term; every other case uses the Condat–Vũ block (see :func:`supported`). The dual variable
``z`` is the TV dual of the prox, on the scale of the Condat–Vũ block's (|z| <= 1,
grad f + alpha K^T z = 0 at the solution), so warm starts carry over between the two.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from numpy.typing import DTypeLike
from torch import Tensor

from lbi_engine.operators.finite_differences import DivAdd, GradInto, zero_unused
from lbi_engine.protocols import Layer, Problem
from lbi_engine.regularisers import TotalVariation
from lbi_engine.settings.solver import SolverOptions
from lbi_engine.solvers._inplace import dense_matrix, dual_prox_plan, sigma_inplace
from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.backend import numba_enabled
from lbi_engine.solvers.base import StopReason

THETA = 1.0  # inner accuracy relative to the outer step (prototype: 0.01-1 as fast)
INNER_MAX = 200  # FGP steps per prox at most (measured: 13-70 per prox on average)
CHECK_EVERY = 4  # duality-gap test every this many FGP steps (a test costs half a step)
PRIMAL = 0.99  # tau = PRIMAL / L: FISTA needs tau <= 1/L, 1 % for power-iteration slack
_TINY = 1e-12


def supported(problem: Problem, options: SolverOptions, fixed_data: bool) -> bool:
    """Whether :class:`AcceleratedBlock` handles this run (else: Condat–Vũ).

    ``steps="auto"`` takes it only where the prox runs compiled (CPU with numba): its torch
    path costs ~0.3 ms per inner step on one 64x64 image, which made it slower in wall time
    than Condat–Vũ there although it needs far fewer products with W (NOTES.md).
    """
    inner = getattr(problem.reg, "inner", None)
    if options.steps == "auto" and (problem.device.type != "cpu" or _compiled_prox() is None):
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
        self.tau_z = 1.0 / (self.lam * self.k_norm_sq)  # FGP step on the prox's dual
        self.rule, self.warning = "accelerated", None
        self.use_dual = True
        self.batch = b = int(x.shape[0])
        self.steps_taken = 0
        self.inner_steps = 0
        self.image_shape = img = tuple(self.reg.image_shape)
        self._eps = torch.finfo(x.dtype).eps
        dtype, device = x.dtype, x.device
        self._cur = 0
        self._x = [x.detach().clone().contiguous(), x.detach().clone().contiguous()]
        self._y, self._v, self._u, self._d = (torch.empty_like(self._x[0]) for _ in range(4))
        field = (b, 2, *img)
        self._p = torch.zeros(field, dtype=dtype, device=device)
        if z is not None:
            self._p.copy_(z.reshape(field))
        self._pp, self._q, self._pn, self._g = (
            torch.zeros(field, dtype=dtype, device=device) for _ in range(4))
        inner = self.reg.inner
        if not isinstance(inner, TotalVariation):  # supported() admits TV only
            raise TypeError(f"the accelerated block handles TV, not {inner.name!r}")
        self._isotropic = inner.isotropic
        self._lo, self._hi = float(inner.lo), float(inner.hi)  # +-inf: no box
        self._boxed = inner.constrained
        dual_prox_plan(inner, self._p)(0.0, self.alpha)  # a warm start inside the ball
        zero_unused(self._p, img)
        self._proj = dual_prox_plan(inner, self._pn)
        self._div_q = DivAdd(self._q, self._u, img)
        self._div_pp = DivAdd(self._pp, self._u, img)
        self._grad_u = GradInto(self._u, self._g, img)
        self._t = torch.ones(b, dtype=dtype, device=device)  # FISTA's t_k per sample
        self._beta = torch.zeros(b, dtype=dtype, device=device)
        if momentum is not None:
            self._x[1].copy_(momentum[0].reshape(x.shape))
            self._t.copy_(momentum[1][0])
            self._beta.copy_(momentum[1][1])
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
        self._kernel = _compiled_prox() if x.device.type == "cpu" else None
        if self._kernel is not None:  # numpy views of the buffers, made once
            lead = math.prod(img[:-2]) if len(img) > 2 else 1
            hw = (int(img[-2]), int(img[-1]))
            self._np = [t.view(b, lead, *hw).numpy() for t in (self._v, self._y, self._u)]
            self._np_pp = self._pp.view(b, 2, lead, *hw).numpy()
            _warm_up(self._kernel, self._np[0].dtype, self._isotropic)

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
        return self._x[1 - self._cur], torch.stack((self._t, self._beta))

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
        if self._kernel is not None:
            self._prox_compiled(monitor)
        else:
            self._prox(monitor)
        x_new, a_new = x_old, a_old  # slot nxt receives the new iterate
        x_new.copy_(self._u)
        self._forward_into(x_new, a_new)
        self._momentum(x, x_new)
        changes = self._changes(monitor, cur, nxt)
        self._cur = nxt
        self.steps_taken += 1
        return changes

    # -- the inexact prox -------------------------------------------------------------------------
    def _prox(self, monitor: RunMonitor) -> None:
        """FGP on the dual of min_u 0.5 ||u - v||^2 + lam TV(u), warm-started at the last
        dual, until the gap test passes for every running sample; leaves u = v + lam div p
        and the dual in ``_pp``."""
        pp, q, pn = self._pp, self._q, self._pn
        pp.copy_(self._p)
        q.copy_(pp)
        batch = self.batch
        view = (-1, *([1] * (pp.dim() - 1)))
        need = monitor.active.clone()
        t = 1.0
        for j in range(INNER_MAX + 1):
            if _test_due(j):
                need &= ~self._gap_small()
                if j == INNER_MAX or not bool(need.any()):
                    return
            # one FGP step from q; samples that passed the test keep pp
            self._u.copy_(self._v)
            self._div_q(self.lam)
            self._clip_u()
            self._grad_u()
            torch.add(q, self._g, alpha=self.tau_z, out=pn)
            self._proj(self.tau_z, self.alpha)
            t_next = (1.0 + math.sqrt(1.0 + 4.0 * t * t)) / 2.0
            torch.sub(pn, pp, out=q)
            q.mul_((t - 1.0) / t_next).add_(pn)
            t = t_next
            running = int(need.sum()) if batch > 1 else 1
            if running < batch:
                torch.where(need.view(view), pn, pp, out=pp)
            else:
                pp.copy_(pn)
            self.inner_steps += running

    def _prox_compiled(self, monitor: RunMonitor) -> None:
        """The same prox as :meth:`_prox`, one compiled call (``_fgp_kernel.fgp_prox``)."""
        assert self._kernel is not None  # step() calls this only with a kernel
        self._pp.copy_(self._p)
        v, y, u = self._np
        active = monitor.active.numpy()
        self.inner_steps += int(self._kernel(
            v, y, self._np_pp, u, active, self.lam, self.tau_z, self._isotropic, THETA,
            16.0 * self._eps, INNER_MAX, CHECK_EVERY, self._lo, self._hi))

    def _gap_small(self) -> Tensor:
        """u = v + lam div pp, and per sample whether the prox's duality gap is small."""
        u, g, pp = self._u, self._g, self._pp
        u.copy_(self._v)
        self._div_pp(self.lam)
        self._clip_u()
        self._grad_u()
        batch = self.batch
        gf = g.view(batch, 2 * (g[0, 0].numel() // _pixels(self.image_shape)), -1)
        if self._isotropic:
            tv = torch.linalg.vector_norm(gf, dim=1).sum(dim=1)
        else:
            tv = gf.abs().sum(dim=(1, 2))
        pairing = torch.linalg.vecdot(g.view(batch, -1), pp.view(batch, -1))
        gap = self.lam * (tv - pairing)
        torch.sub(u, self._y, out=self._d)
        step_sq = torch.linalg.vector_norm(self._d.view(batch, -1), dim=1).square()
        floor = 16.0 * self._eps * self.lam * tv  # rounding level of the gap
        return gap <= torch.maximum(0.5 * THETA * step_sq, floor)

    def _clip_u(self) -> None:
        """u onto the box (constrained TV denoising); nothing without one."""
        if self._boxed:
            self._u.clamp_(min=self._lo if self._lo > -math.inf else None,
                           max=self._hi if self._hi < math.inf else None)

    # -- momentum, changes, freezing ------------------------------------------------------------
    def _momentum(self, x: Tensor, x_new: Tensor) -> None:
        """t_{k+1} and beta for the next extrapolation; restart (t = 1) where the step
        x_new - x points against y - x_new (O'Donoghue & Candès' gradient test)."""
        batch = self.batch
        torch.sub(self._y, x_new, out=self._d)
        uphill = torch.linalg.vecdot(self._d.view(batch, -1),
                                     (x_new - x).view(batch, -1)) > 0
        t = torch.where(uphill, torch.ones_like(self._t), self._t)
        t_next = (1.0 + torch.sqrt(1.0 + 4.0 * t * t)) / 2.0
        torch.div(t - 1.0, t_next, out=self._beta)
        self._t.copy_(t_next)

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


def _warm_up(kernel: Callable[..., Any], dtype: DTypeLike, isotropic: bool) -> None:
    """Compiles (or loads from numba's cache) the kernel for this dtype on a 2x2 image, so
    that the first iteration, which the run's stopwatch counts, does not pay for it."""
    import numpy as np

    img = np.zeros((1, 1, 2, 2), dtype=dtype)
    field = np.zeros((1, 2, 1, 2, 2), dtype=dtype)
    kernel(img, img.copy(), field, img.copy(), np.ones(1, dtype=bool), 1.0, 1.0, isotropic,
           THETA, 0.0, 1, CHECK_EVERY, -math.inf, math.inf)


def _test_due(j: int) -> bool:
    """Gap test before FGP step j: after the first step (so the dual moves every
    iteration), then every CHECK_EVERY steps, and at the cap."""
    return j >= 1 and ((j - 1) % CHECK_EVERY == 0 or j == INNER_MAX)


def _compiled_prox() -> Callable[..., Any] | None:
    """``_fgp_kernel.fgp_prox`` where the numba backend is enabled, else None (torch path;
    :func:`backend.numba_enabled`: ``LBI_NO_NUMBA=1``, or no numba)."""
    if not numba_enabled():
        return None
    try:
        from lbi_engine.solvers._fgp_kernel import fgp_prox
    except ImportError:
        return None
    return fgp_prox


def _pixels(image_shape: tuple[int, ...]) -> int:
    return int(image_shape[-2]) * int(image_shape[-1])
