"""The prox of TV (with its box) by FGP: the one implementation every method uses.

    u = argmin_{lo <= u <= hi} 1/2 ||u - v||^2 + lam TV(u) = clip(v + lam div p),

p the dual field in the unit ball (pixelwise over the 2*C components for isotropic TV, so
colour TV is vectorial: MATH.md), found by FGP (Beck & Teboulle 2009: accelerated projected
gradient on the dual, with the projection onto the box applied in the primal recovery of
each step, which is their constrained TV denoising), warm-started from the last dual. With
u = clip(v + lam div p) the duality gap is still

    gap(p) = lam (TV(u) - <grad u, p>)  >= 0,

and the prox is accurate enough once gap <= theta/2 ||u - y||^2 (``y``: the point the
caller's outer step started from), a relative-error criterion under which inexact
accelerated proximal gradient keeps its rate (Villa, Salzo, Baldassarre & Verri 2013), or
once the gap is at rounding level (16 eps lam TV(u)) so float32 runs do not spin. The test
runs after the first step (so the dual moves on every call), then every ``check_every``
steps (a test costs half a step), and at the cap.

Two backends compute the same iterates to rounding, chosen once at construction: the
compiled kernel (``_fgp_kernel``, numba on the CPU: a whole prox is one loop nest) and torch
operations on buffers made once (GPU, or numba switched off: ``operators.backend``).

A *primal map* generalises the box (torch backend only): FGP is accelerated projected
gradient on the dual of min_u phi(u) + lam TV(u) for any phi = 1/2 ||u - v||^2_M + g with g
convex and M >= I diagonal-or-not, i.e. phi 1-strongly convex. Its primal recovery is
u(p) = grad phi*(lam div p), 1-Lipschitz in lam div p, so the dual's gradient lam grad u(p)
is Lipschitz with constant lam^2 ||grad||^2 and the step, the projection and the momentum are
the same as for the box (phi = 1/2 ||u - v||^2 + iota_box, u(p) = clip(v + lam div p)). The
duality gap is lam (TV(u) - <grad u, p>) again: D(p) = phi(u) - lam <u, div p> at
u = u(p), and P(u) - D(p) = lam TV(u) + lam <u, div p>. The learned Gaussian prior + TV
(``_gaussian``) uses it with u(p) = prox_{a G + box}(v + lam div p). A per-pixel *weight*
0 < w <= 1 (both backends) is the metric case phi = 1/2 sum (u - v)^2 / w + box, u(p) =
clip(v + w lam div p): the joint method's step with the Gaussian prior + TV (MATH.md §4.3).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lbi_engine.operators.backend import numba_enabled
from lbi_engine.operators.finite_differences import DivAdd, GradInto, grad_norm_sq
from lbi_engine.operators.momentum import next_t

__all__ = ["THETA", "INNER_MAX", "CHECK_EVERY", "TVProx", "compiled_kernel",
           "dual_ball_projection", "PrimalMap"]

#: u <- u(p) in place, given u = lam div p on entry: the gradient of phi* of a 1-strongly
#: convex phi (module docstring); None: the box's clip(v + lam div p).
PrimalMap = Callable[[Tensor], object]

THETA = 1.0  # inner accuracy relative to the outer step (prototype: 0.01-1 as fast)
INNER_MAX = 200  # FGP steps per prox at most (measured: 13-70 per prox on average)
CHECK_EVERY = 4  # duality-gap test every this many FGP steps (a test costs half a step)


def compiled_kernel() -> Any | None:
    """``_fgp_kernel.fgp_prox`` where the numba backend is enabled, else None (torch backend;
    :func:`operators.backend.numba_enabled`: ``LBI_NO_NUMBA=1``, or no numba)."""
    if not numba_enabled():
        return None
    try:
        from lbi_engine.regularisers._fgp_kernel import fgp_prox
    except ImportError:
        return None
    return fgp_prox


class TVProx:
    """prox_{lam (TV + box)} for a fixed batch shape, on buffers it owns.

    A caller writes the input into :attr:`v`, the outer step's start into :attr:`y` and the
    warm-start dual into :attr:`dual` (all contiguous: ``(B, *image_shape)`` and
    ``(B, 2, *image_shape)``, the entries grad never writes kept 0), calls the object, and
    reads the prox from :attr:`u` and the dual from :attr:`dual`.
    """

    def __init__(self, isotropic: bool, lo: float, hi: float, batch: int,
                 image_shape: tuple[int, ...], dtype: torch.dtype,
                 device: torch.device | str = "cpu", compiled: bool | None = None,
                 theta: float = THETA, inner_max: int = INNER_MAX,
                 check_every: int = CHECK_EVERY, primal: PrimalMap | None = None,
                 weight: Tensor | None = None) -> None:
        """TV ``isotropic`` or not, with the box [lo, hi] (+-inf: none); made by
        ``TotalVariation.fgp``. ``compiled``: None takes the kernel where it can run (CPU,
        numba enabled); True asks for it (a RuntimeError where it cannot), False: torch.
        ``primal``: a primal map (module docstring; then lo, hi are unused and the torch
        backend runs, the kernel knowing only the box and the weight). ``weight``: per-pixel
        weights in (0, 1] of ``image_shape`` (module docstring), or None."""
        device = torch.device(device)
        self.primal = primal
        self.weight = None if weight is None else \
            weight.to(dtype=dtype, device=device).reshape(image_shape).contiguous()
        # w > 1 would break the step 1 / (lam ||grad||^2), w <= 0 the strong convexity
        if self.weight is not None and not bool(((self.weight > 0) & (self.weight <= 1)).all()):
            raise ValueError("the TV prox's per-pixel weights must lie in (0, 1]")
        if self.weight is not None and primal is not None:
            raise ValueError("give the TV prox a weight or a primal map, not both")
        if primal is not None:
            if compiled:
                raise RuntimeError("the compiled TV prox knows only the box, not a primal map")
            compiled = False
        self.image_shape = img = tuple(int(n) for n in image_shape)
        self.batch = batch
        self.isotropic = bool(isotropic)
        self.lo, self.hi = float(lo), float(hi)  # +-inf: no box
        self.boxed = self.lo > -math.inf or self.hi < math.inf
        self.theta, self.inner_max, self.check_every = float(theta), int(inner_max), \
            int(check_every)
        self.k_norm_sq = float(grad_norm_sq(img))
        self._eps = torch.finfo(dtype).eps
        self.floor = 16.0 * self._eps  # the gap's rounding level, relative to lam TV(u)
        self.v, self.y, self.u = (torch.zeros((batch, *img), dtype=dtype, device=device)
                                  for _ in range(3))
        field = (batch, 2, *img)
        self.dual = torch.zeros(field, dtype=dtype, device=device)
        self._all = torch.ones(batch, dtype=torch.bool, device=device)
        kernel = compiled_kernel() if device.type == "cpu" and compiled is not False else None
        if compiled and kernel is None:
            raise RuntimeError("the compiled TV prox needs the CPU and numba "
                               "(unset LBI_NO_NUMBA)")
        self.kernel = kernel
        if kernel is not None:  # numpy views (B, lead, H, W) of the buffers, made once
            lead = math.prod(img[:-2]) if len(img) > 2 else 1
            hw = (img[-2], img[-1])
            self.arrays = tuple(t.view(batch, lead, *hw).numpy() for t in (self.v, self.y))
            self._np_dual = self.dual.view(batch, 2, lead, *hw).numpy()
            self._np_u = self.u.view(batch, lead, *hw).numpy()
            self._np_all = self._all.numpy()
            self._no_field = np.zeros((2, lead, *hw), dtype=self._np_u.dtype)
            self._np_weight = None if self.weight is None else \
                self.weight.view(lead, *hw).numpy()
            self._warm_up()
        else:  # torch: the FGP's work buffers and fixed-buffer grad / div
            self._q, self._pn, self._g = (torch.zeros(field, dtype=dtype, device=device)
                                          for _ in range(3))
            self._d = torch.empty_like(self.u)
            self._div_q = DivAdd(self._q, self.u, img)
            self._div_p = DivAdd(self.dual, self.u, img)
            self._grad_u = GradInto(self.u, self._g, img)
            self._project = dual_ball_projection(self._pn, self.isotropic)

    @staticmethod
    def compiles_on(device: torch.device | str) -> bool:
        """Whether a prox built for ``device`` runs the compiled kernel (else torch)."""
        return torch.device(device).type == "cpu" and compiled_kernel() is not None

    @property
    def compiled(self) -> bool:
        return self.kernel is not None

    def kernel_arguments(self, lam: float) -> tuple[Any, ...]:
        """The compiled kernel's arguments after (v, y) for weight ``lam``, all samples
        active: for a caller that runs ``_fgp_kernel.fgp_prox`` inside a compiled loop."""
        assert self.kernel is not None  # only with the compiled backend
        return (self._np_dual, self._np_u, self._np_all, lam, 1.0 / (lam * self.k_norm_sq),
                self.isotropic, self.theta, self.floor, self.inner_max, self.check_every,
                self.lo, self.hi, self._np_weight)

    def __call__(self, lam: float, active: Tensor | None = None) -> int:
        """The prox of ``v`` with weight ``lam`` into ``u``, FGP warm-started at ``dual``
        (updated); samples where ``active`` is False are left alone. Returns the FGP steps
        taken, summed over the samples."""
        if self.kernel is not None:
            v, y = self.arrays
            act = self._np_all if active is None else active.numpy()
            return int(self.kernel(v, y, self._np_dual, self._np_u, act, lam,
                                   1.0 / (lam * self.k_norm_sq), self.isotropic, self.theta,
                                   self.floor, self.inner_max, self.check_every, self.lo,
                                   self.hi, self._np_weight))
        return self._torch(lam, self._all if active is None else active)

    def value(self, x: Tensor) -> Tensor:
        """TV(x) per sample for x ``(B, *image_shape)`` (the box ignored), by the compiled
        kernel's own loop where it runs (float64 sums; the torch formula costs ~10 small
        operations, as much as a product with W on small networks)."""
        if self.kernel is None:
            from lbi_engine.operators.finite_differences import tv_aniso_value, tv_iso_value

            image = x.reshape(x.shape[0], *self.image_shape)  # callers may pass flat blocks
            return tv_iso_value(image) if self.isotropic else tv_aniso_value(image)
        from lbi_engine.regularisers._fgp_kernel import _gap_parts

        images = x.reshape(-1, *self._np_u.shape[1:]).numpy()
        values = [_gap_parts(image, image, self._no_field, self.isotropic)[0]
                  for image in images]
        return torch.tensor(values, dtype=x.dtype)

    # -- the torch backend ----------------------------------------------------------------
    def _torch(self, lam: float, active: Tensor) -> int:
        """FGP for all samples at once; a sample that passed the gap test keeps its dual
        (so each sample's iterates are those of a run on its own)."""
        pp, q, pn = self.dual, self._q, self._pn
        q.copy_(pp)
        batch, step = self.batch, 1.0 / (lam * self.k_norm_sq)
        view = (-1, *([1] * (pp.dim() - 1)))
        need = active.clone()
        steps, t = 0, 1.0
        for j in range(self.inner_max + 1):
            if j >= 1 and ((j - 1) % self.check_every == 0 or j == self.inner_max):
                need &= ~self._gap_small(lam)
                if j == self.inner_max or not bool(need.any()):
                    return steps
            # one FGP step from q
            self._recover(self._div_q, lam)
            self._grad_u()
            torch.add(q, self._g, alpha=step, out=pn)
            self._project()
            t_next = next_t(t)
            torch.sub(pn, pp, out=q)
            q.mul_((t - 1.0) / t_next).add_(pn)
            t = t_next
            running = int(need.sum()) if batch > 1 else 1
            if running < batch:
                torch.where(need.view(view), pn, pp, out=pp)
            else:
                pp.copy_(pn)
            steps += running
        return steps

    def _gap_small(self, lam: float) -> Tensor:
        """u = clip(v + lam div p), and per sample whether the duality gap is small."""
        u, g, pp = self.u, self._g, self.dual
        self._recover(self._div_p, lam)
        self._grad_u()
        batch = self.batch
        pixels = self.image_shape[-2] * self.image_shape[-1]
        gf = g.view(batch, 2 * (g[0, 0].numel() // pixels), -1)
        if self.isotropic:
            tv = torch.linalg.vector_norm(gf, dim=1).sum(dim=1)
        else:
            tv = gf.abs().sum(dim=(1, 2))
        pairing = torch.linalg.vecdot(g.view(batch, -1), pp.view(batch, -1))
        gap = lam * (tv - pairing)
        torch.sub(u, self.y, out=self._d)
        step_sq = torch.linalg.vector_norm(self._d.view(batch, -1), dim=1).square()
        floor = self.floor * lam * tv
        return gap <= torch.maximum(0.5 * self.theta * step_sq, floor)

    def _recover(self, div_add: DivAdd, lam: float) -> None:
        """u = u(field) for the field ``div_add`` reads: clip(v + lam div), or the primal
        map of lam div."""
        if self.weight is not None:
            self.u.zero_()
            div_add(lam)
            self.u.mul_(self.weight).add_(self.v)
            self._clip_u()
        elif self.primal is None:
            self.u.copy_(self.v)
            div_add(lam)
            self._clip_u()
        else:
            self.u.zero_()
            div_add(lam)
            self.primal(self.u)

    def _clip_u(self) -> None:
        if self.boxed:
            self.u.clamp_(min=self.lo if self.lo > -math.inf else None,
                          max=self.hi if self.hi < math.inf else None)

    def _warm_up(self) -> None:
        """Compiles (or loads from numba's cache) the kernel for this dtype on a 2x2 image,
        so that the first call, which a run's stopwatch counts, does not pay for it."""
        assert self.kernel is not None
        dtype = self.arrays[0].dtype
        img = np.zeros((1, 1, 2, 2), dtype=dtype)
        field = np.zeros((1, 2, 1, 2, 2), dtype=dtype)
        weight = None if self._np_weight is None else np.ones((1, 2, 2), dtype=dtype)
        self.kernel(img, img.copy(), field, img.copy(), np.ones(1, dtype=bool), 1.0, 1.0,
                    self.isotropic, self.theta, 0.0, 1, self.check_every, -math.inf, math.inf,
                    weight)


def dual_ball_projection(p: Tensor, isotropic: bool) -> Callable[[], Any]:
    """``p`` onto the dual unit ball in place: pixelwise Euclidean over the 2*C components
    (isotropic) or the box [-1, 1] (anisotropic)."""
    if not isotropic:
        return lambda: p.clamp_(-1.0, 1.0)
    batch, pixels = p.shape[0], p.shape[-2] * p.shape[-1]
    comps = p.view(batch, -1, pixels)  # (B, 2*C, H*W)
    parts = comps.unbind(1)
    scale = torch.empty(batch, pixels, dtype=p.dtype, device=p.device)
    scale_b = scale.unsqueeze(1)

    def project() -> None:
        torch.mul(parts[0], parts[0], out=scale)
        for part in parts[1:]:
            scale.addcmul_(part, part)
        scale.sqrt_().clamp_min_(1.0)
        comps.div_(scale_b)

    return project
