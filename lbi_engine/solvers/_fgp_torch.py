"""The TV prox by FGP in torch operations, stopped by the compiled kernel's duality-gap test:
the joint method's fallback where numba is not usable (``LBI_NO_NUMBA``, no numba, a GPU).

    u = argmin 1/2 ||u - v||^2 + lam TV(u) = v - lam K^T p,  p the dual in the unit ball,
    gap(p) = lam (TV(u) - <K u, p>) >= 0,

and the prox is accurate enough once gap <= THETA/2 ||u - y||^2 (y the point the outer step
started from; ``_accelerated.THETA``), or the gap is at rounding level (16 eps lam TV(u)):
the test of ``_fgp_kernel.fgp_prox``, so the two paths stop their inner loops alike. A fixed
number of FGP steps (5 before) leaves an error that does not shrink with the outer step, and
the joint run then never met a 1e-4 tolerance (6000 steps on a test CNN where the compiled
prox stops in ~300).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from lbi_engine.protocols import InputRegulariser


def fgp_prox(reg: InputRegulariser, v: Tensor, y: Tensor, dual: Tensor, lam: float,
             k_norm_sq: float, theta: float, inner_max: int, check_every: int,
             lo: float = -math.inf, hi: float = math.inf) -> tuple[Tensor, Tensor, int]:
    """(u, the dual, FGP steps taken) for the image batch ``v``, warm-started at ``dual``;
    ``reg``: a TV regulariser (``K``, ``KT``, ``prox_dual``, ``value``). With a box [lo, hi]
    the primal is clipped, u = clip(v - lam K^T p) (constrained ROF, Beck & Teboulle 2009),
    as the compiled kernel does."""
    step = 1.0 / (lam * k_norm_sq)
    boxed = lo > -math.inf or hi < math.inf

    def primal(p: Tensor) -> Tensor:
        u = v - lam * reg.KT(p).reshape(v.shape)
        return u.clamp(min=lo if lo > -math.inf else None,
                       max=hi if hi < math.inf else None) if boxed else u

    rounding = 16.0 * torch.finfo(v.dtype).eps
    p_prev, q, t = dual, dual, 1.0
    for j in range(inner_max + 1):
        if j % check_every == 0 or j == inner_max:
            u = primal(p_prev)
            if j == inner_max or bool(_gap_small(reg, u, p_prev, y, lam, theta,
                                                 rounding).all()):
                return u, p_prev, j
        u_q = primal(q)
        p = reg.prox_dual(q + step * reg.K(u_q), step, 1.0)
        t_next = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
        q = p + ((t - 1.0) / t_next) * (p - p_prev)
        p_prev, t = p, t_next
    raise AssertionError("unreachable: the loop returns at j == inner_max")


def _gap_small(reg: InputRegulariser, u: Tensor, p: Tensor, y: Tensor, lam: float, theta: float,
               rounding: float) -> Tensor:
    """Per sample: gap(p) <= max(THETA/2 ||u - y||^2, rounding lam TV(u))."""
    batch = u.shape[0]
    tv = reg.value(u)  # u is clipped into the box exactly, so this is TV(u)
    pairing = (reg.K(u) * p).reshape(batch, -1).sum(dim=1)
    gap = lam * (tv - pairing)
    step_sq = (u - y.reshape(u.shape)).reshape(batch, -1).square().sum(dim=1)
    return gap <= torch.maximum(0.5 * theta * step_sq, rounding * lam * tv)
