"""The Condat–Vũ iteration on one lifted layer, allocation-free (MATH.md §3.2–3.3).

    x+ = prox_{tau_x g}(x - tau_x (W^T (sigma(W x + b) - data) + alpha K^T z))
    z+ = prox_{tau_z h*}(z + tau_z alpha K (2 x+ - x))

Shared by PDHG (data = y_delta) and the x_0 block of the joint method (data = x_1).

Why it looks the way it does: on the paper's problems the two products with W cost about
0.5 ms and everything else is a dozen operations on a few thousand pixels, where each torch
call costs as much as its arithmetic. So the state lives in two preallocated slots (old/new,
swapped every step), each update writes into its buffer in place through views prepared once
(see ``one_layer/inplace.py`` and ``finite_differences.GradInto``/``DivAdd``), the products with W
are single ``addmm`` calls that also fold in the bias and the gradient step, and the
convergence and finiteness checks reuse two norms per variable. For TV / gradient-Tikhonov on
the CPU and large enough images, everything past the two products (div, step, box, dual
ascent, projection, norms) is one numba kernel instead (``one_layer.inplace.fused_tv_plan``,
``kernels/tv_primal_dual.py``): for a batch those ~20 torch passes are memory-bound. There, for
a dense W and a few samples, the two products are one pass over W (``inplace.one_pass_plan``).
Measured effect and the floor it is compared against: benchmarks/RESULTS.md.

The tensors ``x`` and ``z`` are the live slots: they are overwritten two steps later, so
callers that keep them must clone (the run monitor's records do).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from lbi_engine.operators.finite_differences import DivAdd, GradInto, zero_unused
from lbi_engine.protocols import Layer, Problem
from lbi_engine.regularisers import GradientTikhonov, TotalVariation
from lbi_engine.settings.solver import SolverOptions
from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.base import StopReason
from lbi_engine.solvers.one_layer.anderson import Anderson
from lbi_engine.solvers.one_layer.inplace import (
    FusedTV,
    OnePassGradient,
    Plan,
    box_plan,
    dense_matrix,
    dual_prox_plan,
    fused_tv_plan,
    one_pass_plan,
    primal_prox_plan,
    sigma_inplace,
)
from lbi_engine.solvers.one_layer.step_sizes import paper_steps_warning, resolve_rule, step_sizes

_TINY = 1e-12  # denominator floor of the relative change (as base.relative_change)
Changes = tuple[Tensor, Tensor | None]  # per-sample changes of x and of z (None: no dual)


class PrimalDualBlock:
    """One Condat–Vũ iteration on x for a single lifted layer and the problem's regulariser."""

    def __init__(
        self,
        layer: Layer,
        problem: Problem,
        options: SolverOptions,
        x: Tensor,
        z: Tensor | None = None,
        fixed_data: bool = True,
    ) -> None:
        """``fixed_data=False`` (the joint method, whose data x_1 changes every sweep, so its
        map is not a fixed one) turns Anderson mixing off and makes ``steps="auto"`` mean
        "safe" instead of "balanced"."""
        self.affine = layer.affine
        self.activation = layer.activation
        self.reg = problem.reg
        self.alpha = float(problem.alpha)
        self.tol_mode = "relative"
        self.lipschitz = float(self.affine.norm()) ** 2
        self.use_dual = bool(self.reg.has_dual) and self.alpha > 0
        k_norm_sq = self.reg.K_norm_sq() if self.use_dual else 0.0
        self.rule = resolve_rule(options.steps, fixed_data)
        self.tau_x, self.tau_z = step_sizes(self.rule, self.lipschitz, self.alpha, k_norm_sq)
        self.tau_x *= options.step_scale
        self.warning = (
            paper_steps_warning(self.lipschitz, self.alpha, k_norm_sq)
            if options.steps == "paper"
            else None
        )
        self.batch = int(x.shape[0])
        self.steps_taken = 0
        memory = int(getattr(options, "anderson", 0))
        self._anderson_memory = memory if fixed_data else 0
        self._build_state(x, z)
        self._build_plans()
        self._aa = Anderson(self, memory) if self._anderson_memory > 0 else None

    # -- state ---------------------------------------------------------------------------------
    @property
    def x(self) -> Tensor:
        return self._x[self._cur]

    @property
    def z(self) -> Tensor | None:
        return self._z[self._cur] if self.use_dual else None

    @property
    def x_slots(self) -> list[Tensor]:
        """The two iterate slots x[k] (for Anderson mixing)."""
        return self._x

    @property
    def x_pairs(self) -> list[Tensor]:
        """Per slot k: (2, B, *x_shape), the iterate and the change into it."""
        return self._xp

    @property
    def z_pairs(self) -> list[Tensor]:
        """The same for the dual (empty without one)."""
        return self._zp

    def _build_state(self, x: Tensor, z: Tensor | None) -> None:
        """Two slots per variable; slot k holds the iterate and, right behind it in memory,
        the change that produced it, so one reduction gives both norms. On the CPU, with W one
        matrix, x's slots lie half a page from W (see :func:`_off_the_page_of`)."""

        def pair(shape: tuple[int, ...]) -> Tensor:
            return torch.zeros((2, self.batch, *shape), dtype=x.dtype, device=x.device)

        self._cur = 0
        dense = dense_matrix(self.affine)
        shape_x = (2, self.batch, *x.shape[1:])
        self._xp = [pair(tuple(x.shape[1:])) if dense is None or x.device.type != "cpu"
                    else _off_the_page_of(dense[0], shape_x, x.dtype, 1)
                    for _ in range(2)]
        self._x = [p[0] for p in self._xp]
        self._x[0].copy_(x)
        self._zp: list[Tensor] = []  # the dual's slots: none without a dual part
        self._z: list[Tensor] = []
        if not self.use_dual:
            return
        inner = getattr(self.reg, "inner", None)
        self.image_shape = tuple(getattr(self.reg, "image_shape", x.shape[1:]))
        self._fast_k = isinstance(inner, (TotalVariation, GradientTikhonov))
        shape = (2, *self.image_shape) if self._fast_k else tuple(self.reg.K(x[:1]).shape[1:])
        self._zp = [pair(shape) for _ in range(2)]
        self._z = [p[0] for p in self._zp]
        if z is not None:
            self._z[0].copy_(z.reshape(self._z[0].shape))
            if self._fast_k:
                # entries grad never writes: div ignores them, the flat DivAdd needs them 0
                zero_unused(self._z[0], self.image_shape)
        self._xbar = torch.empty_like(self._x[0])

    def _build_plans(self) -> None:
        inner = self.reg.inner  # the regulariser itself, on images
        image = getattr(self.reg, "image_shape", None)
        self._sigma_ = sigma_inplace(self.activation)
        dense = dense_matrix(self.affine)
        self._gemm: tuple[Tensor, Tensor, Tensor | None] | None = None
        self._data: Tensor | None = None
        if dense is not None:
            weight, bias = dense
            x = self._x[0]
            self._gemm = (weight, weight.t(), bias)
            self._a = torch.empty(self.batch, weight.shape[0], dtype=x.dtype, device=x.device)
            self._xf = [t.view(self.batch, -1) for t in self._x]
            self._dxf = [p[1].view(self.batch, -1) for p in self._xp]
        self._prox_x = [primal_prox_plan(inner, _img(t, image)) for t in self._x]
        self._box_x = [box_plan(inner, t) for t in self._x]
        self._ball_z: Sequence[Plan | None] = (None, None)
        self._fused: FusedTV | None = None
        self._one_pass: OnePassGradient | None = None
        if not self.use_dual:
            return
        self._prox_z = [dual_prox_plan(inner, t) for t in self._z]
        if isinstance(inner, TotalVariation):  # dom h* is the dual ball: keep z inside
            self._ball_z = self._prox_z
        if self._fast_k:
            img = self.image_shape
            self._div_add = [DivAdd(self._z[k], self._xp[1 - k][1], img) for k in (0, 1)]
            self._grad_into = [GradInto(self._xbar, self._z[k], img) for k in (0, 1)]
            # CPU: the whole regulariser part of the step and the four norms in one numba
            # pass (None: torch path). Without Anderson mixing it leaves z's change half
            # unwritten: nothing but its norm is needed then.
            self._fused = fused_tv_plan(inner, self._xp, self._zp, img, self.tau_x, self.tau_z,
                                        self.alpha, store_dz=self._anderson_memory > 0)
        if self._fused is not None and dense is not None:  # and W's two products in one pass
            self._one_pass = one_pass_plan(self.activation, self.affine, self._xf, self._dxf,
                                           self.tau_x)

    # -- the iteration ---------------------------------------------------------------------------
    def step(self, data: Tensor, monitor: RunMonitor, pre: Tensor | None = None) -> Changes:
        """One iteration; returns the per-sample changes of x and z (StopRule.tol_mode).

        ``pre``: W x + b at the current x when the caller already has it (the joint method
        computes it for its next block anyway); saves one forward product.
        """
        cur, nxt = self._cur, 1 - self._cur
        # the step dx = -tau_x (W^T r + alpha K^T z) is formed on its own and added to x
        # afterwards: as a difference of rounded iterates it would lose its low bits, which
        # Anderson mixing (secants of dx) needs in float32
        dx = self._xp[nxt][1]
        self._products(data, cur, dx, pre)
        if self._fused is not None:  # the rest of the step and the norms, one numba pass
            self._fused_total = self._fused(cur)
        else:
            self._torch_rest(cur, nxt, dx)
        if self._aa is not None:
            self._aa.apply(self, cur, nxt, monitor.iteration)
        changes = self._changes(monitor, cur, nxt)
        self._cur = nxt
        self.steps_taken += 1
        return changes

    def _products(self, data: Tensor, cur: int, dx: Tensor, pre: Tensor | None) -> None:
        """dx = -tau_x W^T (sigma(W x + b) - data) at x = slot ``cur`` (``pre``: W x + b)."""
        tau_x = self.tau_x
        if self._one_pass is not None and pre is None:
            self._one_pass(cur, data)
        elif self._gemm is not None:
            weight, weight_t, bias = self._gemm
            a = self._a
            if pre is not None:
                a.copy_(pre.reshape(a.shape))
            elif bias is None:
                torch.mm(self._xf[cur], weight_t, out=a)
            else:
                torch.addmm(bias, self._xf[cur], weight_t, out=a)
            self._sigma_(a)
            if data is not self._data:  # the flat view of the data, made once per tensor
                self._data, self._data_flat = data, data.reshape(a.shape)
            a.sub_(self._data_flat)
            dxf = self._dxf[1 - cur]
            torch.addmm(dxf, a, weight, beta=0.0, alpha=-tau_x, out=dxf)
        else:
            z = self.affine.apply(self._x[cur]) if pre is None else pre
            residual = self.activation.sigma(z) - data
            torch.mul(self.affine.adjoint(residual), -tau_x, out=dx)

    def step_noting_changes(self, data: Tensor, monitor: RunMonitor) -> Changes | None:
        """:meth:`step` for a caller that only hands the changes to ``monitor.converged``.

        Where the monitor reads them only in its records (``changes_read_at_records``) and
        the fused kernel left its norms, they are computed from those norms when a record
        asks (``monitor.note_change_later``) and None is returned: the same numbers, without
        half a dozen small tensor operations per iteration (as many as the fused kernel's
        whole pass costs on one 64x64 image).
        """
        fused = self._fused
        if fused is None or self._aa is not None or not monitor.changes_read_at_records():
            return self.step(data, monitor)
        self._products(data, self._cur, self._xp[1 - self._cur][1], None)
        total = fused(self._cur)
        if not math.isfinite(total):  # the eager path stops the samples that diverged
            self._fused_total = total
            changes = self._changes(monitor, self._cur, 1 - self._cur)
        else:
            changes = None
            monitor.note_change_later(self._fused_changes)
        self._cur = 1 - self._cur
        self.steps_taken += 1
        return changes

    def _torch_rest(self, cur: int, nxt: int, dx: Tensor) -> None:
        """The step past the products with W in torch calls (what FusedTV does in one pass)."""
        x_old, x_new = self._x[cur], self._x[nxt]
        tau_x, alpha = self.tau_x, self.alpha
        if self.use_dual:  # - tau_x alpha K^T z = + tau_x alpha div z
            if self._fast_k:
                self._div_add[cur](tau_x * alpha)
            else:
                dx.sub_(self.reg.KT(self._z[cur]), alpha=tau_x * alpha)
        torch.add(x_old, dx, out=x_new)
        prox_x = self._prox_x[nxt]
        if prox_x is not None:
            prox_x(tau_x, alpha)
            torch.sub(x_new, x_old, out=dx)
        if self.use_dual:
            self._dual_step(cur, nxt, dx)

    def _dual_step(self, cur: int, nxt: int, dx: Tensor) -> None:
        """z+ = prox(z + tau_z alpha K (2 x+ - x)) and its change. (Forming the change from
        the increment, exact where the projection is inactive, did not help Anderson mixing
        in float32, unlike dx: measured 1080 iterations either way on the circle.)"""
        z_old, z_new = self._z[cur], self._z[nxt]
        xbar = torch.add(self._x[nxt], dx, out=self._xbar)  # 2 x+ - x
        scale = self.tau_z * self.alpha
        if self._fast_k:
            self._grad_into[nxt]()
            torch.add(z_old, z_new, alpha=scale, out=z_new)
        else:
            torch.add(z_old, self.reg.K(xbar), alpha=scale, out=z_new)
        self._prox_z[nxt](self.tau_z, self.alpha)
        torch.sub(z_new, z_old, out=self._zp[nxt][1])

    def _changes(self, monitor: RunMonitor, cur: int, nxt: int) -> tuple[Tensor, Tensor | None]:
        """Per-sample changes; non-finite samples are stopped (DIVERGED) and, like samples
        that stopped earlier, keep their previous iterate (change 0)."""
        batch = self.batch
        nz: Tensor | None
        if self._fused is not None and self._aa is None:  # the kernel's norms (float64)
            nx, nz = self._fused_norms(self._fused)
            total: float | Tensor = self._fused_total
        else:
            # (2, B): ||new||, ||new - old|| per sample, for x and for z
            nx = torch.linalg.vector_norm(self._xp[nxt].view(2, batch, -1), dim=2)
            nz = None
            total = nx.sum()
            if self.use_dual:
                nz = torch.linalg.vector_norm(self._zp[nxt].view(2, batch, -1), dim=2)
                total = total + nz.sum()
        # a norm is finite iff every entry is: one scalar tells whether all samples are fine
        if not math.isfinite(float(total)):
            finite = torch.isfinite(nx).all(dim=0)
            if nz is not None:
                finite &= torch.isfinite(nz).all(dim=0)
            monitor.finish(~finite, StopReason.DIVERGED)
        dxn, dzn = _measured(nx, nz, monitor.stop.tol_mode)
        if not monitor.all_active:
            self._freeze(monitor.active, cur, nxt)
            zero = torch.zeros((), dtype=dxn.dtype, device=dxn.device)
            dxn = torch.where(monitor.active, dxn, zero)
            dzn = None if dzn is None else torch.where(monitor.active, dzn, zero)
        return dxn, dzn

    def _fused_norms(self, fused: FusedTV) -> tuple[Tensor, Tensor]:
        """(||new||, ||new - old||) of x and of z, each (2, B), from the kernel's last pass."""
        # a copy: the kernel rewrites its buffer next step, the monitor keeps dx, dz
        norms = fused.norms.to(self._x[0].dtype, copy=True).T
        return norms[0:2], norms[2:4]

    def _fused_changes(self) -> Changes:
        """The relative changes of the last step (the objective rule's records report them)
        from the kernel's norms, as :meth:`_changes` makes them while every sample runs."""
        assert self._fused is not None  # noted only on the fused path
        return _measured(*self._fused_norms(self._fused), "objective")

    def project(self, k: int) -> None:
        """Slot k back into the feasible set (box for x, dual ball for TV's z) after a
        mixing step; prox steps with g != 0 are not repeated (they are not projections)."""
        box, ball = self._box_x[k], self._ball_z[k]
        if box is not None:
            box(self.tau_x, self.alpha)
        if ball is not None:
            ball(self.tau_z, self.alpha)

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
        x, z = self.x, self.z  # z is None iff there is no dual part
        grad_f = self.affine.adjoint(self.activation.sigma(self.affine.apply(x)) - data)
        grad = grad_f + self.alpha * self.reg.KT(z) if z is not None else grad_f
        moved = self.reg.prox_primal(x - self.tau_x * grad, self.tau_x, self.alpha)
        batch = x.shape[0]
        res = (x - moved).reshape(batch, -1).norm(dim=1) / self.tau_x
        return res / grad_f.reshape(batch, -1).norm(dim=1).clamp_min(1e-12)


def _measured(nx: Tensor, nz: Tensor | None, tol_mode: str) -> Changes:
    """The changes as ``tol_mode`` measures them from (||new||, ||new - old||) rows."""
    if tol_mode == "absolute":
        return nx[1], None if nz is None else nz[1]
    dzn = None if nz is None else nz[1] / nz[0].clamp_min(_TINY)
    return nx[1] / nx[0].clamp_min(_TINY), dzn


# The gradient step writes dx = -tau W^T r row of W after row of W: where dx and W share
# their addresses modulo a 4 KiB page, the CPU takes each load of W for one that may depend
# on the store to dx before it ("4K aliasing") and waits; half a page apart, it never does.
PAGE = 4096


def _off_the_page_of(weight: Tensor, shape: tuple[int, ...], dtype: torch.dtype,
                     half: int) -> Tensor:
    """Zeros of ``shape`` (CPU) placed so that ``tensor[half]`` starts half a page away from
    ``weight``'s address modulo a page (allocated with a page to spare)."""
    numel = math.prod(shape)
    item = torch.empty((), dtype=dtype).element_size()
    room = torch.zeros(numel + PAGE // item, dtype=dtype)
    start_of_half = half * (numel // shape[0]) * item
    wanted = (weight.data_ptr() + PAGE // 2 - start_of_half) % PAGE
    skip = ((wanted - room.data_ptr()) % PAGE) // item
    return room[skip:skip + numel].view(shape)


def _img(x: Tensor, image_shape: tuple[int, ...] | None) -> Tensor:
    """x viewed with the regulariser's image shape (for the generic primal prox)."""
    if image_shape is None or math.prod(image_shape) != math.prod(x.shape[1:]):
        return x
    return x.view(x.shape[0], *image_shape)
