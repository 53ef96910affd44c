"""Softmax as a proximal map (MATH.md §2.2, §2.4): psi = sum x log x - ||x||^2/2 on the simplex.

The simplex is taken along one dimension (``dim``, default 1: the feature/channel dimension)
separately at every other index, so (B, C, H, W) with dim=1 is a per-pixel softmax.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from lbi_engine.activations._base import (
    ProximalActivation,
    Step,
    check_batched,
    per_sample_all,
    solve_increasing,
    xlogx,
)
from lbi_engine.errors import InputError


class Softmax(ProximalActivation):
    """sigma(z) = softmax(z) along ``dim``; B_Psi(x, z) = KL(x || softmax(z)).

    prox_{t Psi} (MATH.md §2.4): the optimality condition (1-t) u_i + t log u_i + t = v_i - mu
    is solved for w_i = log u_i by safeguarded Newton (this is the Lambert-W formula
    u_i = t/(1-t) W0((1-t)/t exp((v_i - mu - t)/t)) evaluated without a W routine, and it
    also covers t > 1), and the scalar mu with sum_i u_i = 1 by a safeguarded 1-D Newton on the
    convex decreasing S(mu) = sum_i u_i(mu) - 1, started at the left end of its bracket so
    the Newton iterates increase monotonically.
    """

    name = "softmax"
    elementwise = False
    lower, upper = 0.0, 1.0

    def __init__(self, dim: int = 1) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int):
            try:
                ok = float(dim) == int(dim)
            except (TypeError, ValueError, OverflowError):  # OverflowError: dim=inf
                ok = False
            if not ok:
                raise InputError(f"softmax: dim={dim!r} must be an integer (1 = features).")
            dim = int(dim)
        if dim == 0:
            raise InputError("softmax: dim=0 is the batch dimension; a softmax across samples "
                             "couples them. Use dim=1 (features/channels) or -1.")
        self.dim = dim

    def _params(self) -> dict[str, Any]:
        return {"dim": self.dim}

    def _axis(self, x: Tensor) -> int:
        d = self.dim if self.dim >= 0 else x.dim() + self.dim
        if not 1 <= d < x.dim():
            raise InputError(
                f"softmax(dim={self.dim}): a tensor of shape {tuple(x.shape)} has no non-batch "
                f"dimension {self.dim}; pass shape (B, n, ...) or choose another dim."
            )
        return d

    def sigma(self, z: Tensor) -> Tensor:
        return torch.softmax(z, dim=self._axis(z))

    def _psi_terms(self, x: Tensor) -> Tensor:
        return xlogx(x) - 0.5 * x * x

    def _conjugate_terms(self, z: Tensor) -> Tensor:
        return torch.logsumexp(z, dim=self._axis(z), keepdim=True)

    def _bregman_terms(self, x: Tensor, z: Tensor) -> Tensor:
        return xlogx(x) - x * torch.log_softmax(z, dim=self._axis(z))

    def in_domain(self, x: Tensor, atol: float = 0.0) -> Tensor:
        """(B,) bool: finite, every x_i >= -atol, and |sum_i x_i - 1| <= sqrt(n) atol along dim."""
        x = check_batched(x, "x")
        d = self._axis(x)
        n = x.shape[d]
        ok = torch.isfinite(x) & (x >= -atol)
        sums_ok = (x.sum(dim=d, keepdim=True) - 1).abs() <= atol * math.sqrt(n)
        return per_sample_all(ok) & per_sample_all(sums_ok)

    def project(self, x: Tensor) -> Tensor:
        """Euclidean projection onto the probability simplex along dim (sort-based, exact)."""
        x = check_batched(x, "x")
        d = self._axis(x)
        xm = x.movedim(d, -1)
        n = xm.shape[-1]
        srt = torch.sort(xm, dim=-1, descending=True).values
        css = srt.cumsum(dim=-1) - 1
        k = torch.arange(1, n + 1, device=x.device, dtype=x.dtype)
        active = (srt - css / k) > 0
        rho = active.to(torch.int64).cumsum(dim=-1).amax(dim=-1, keepdim=True).clamp_min(1)
        theta = css.gather(-1, rho - 1) / rho.to(x.dtype)
        return (xm - theta).clamp_min(0).movedim(-1, d)

    def _prox(self, v: Tensor, t: Step) -> Tensor:
        d = self._axis(v)
        if isinstance(t, float) and t == 1.0:
            return torch.softmax(v, dim=d)
        n = v.shape[d]
        m = min(t, 1.0) if isinstance(t, float) else t.clamp(max=1.0)
        with torch.no_grad():
            vmax = v.amax(dim=d, keepdim=True)
            # mu bracket: at mu_lo the largest u_i is 1 (S >= 0); at mu_hi every u_i <= 1/n.
            h_inv_n = (1 - t) / n - t * math.log(n) + t
            mu_lo = vmax - 1
            mu_hi = vmax - h_inv_n

            def log_u(mu: Tensor) -> Tensor:
                # t w + (1 - t) e^w = c' := v - mu - t with c' <= 1 - t, so w <= 0, where
                # the slope t + (1 - t) e^w lies in [min(t, 1), max(t, 1)].
                c1 = v - mu - t

                def g_and_dg(w: Tensor) -> tuple[Tensor, Tensor, Tensor]:
                    tw, rest = t * w, (1 - t) * torch.exp(w)
                    return tw + rest - c1, t + rest, tw.abs() + rest.abs() + c1.abs()

                lo = -(1 - t - c1).clamp_min(0) / m
                w0 = (c1 / t).clamp_max(0)
                return solve_increasing(g_and_dg, w0, lo, torch.zeros_like(c1))

            def s_and_ds(mu: Tensor) -> tuple[Tensor, Tensor, Tensor]:
                # S is decreasing in mu; negate it so the solver sees an increasing function.
                w = log_u(mu)
                u = torch.exp(w)
                s = u.sum(dim=d, keepdim=True) - 1
                du = u / (t + (1 - t) * u)
                # rounding scale of S: 1 + sum u_i + the inner solves' round-off in each u_i
                c1 = (v - mu - t).abs()
                abs_1mt = abs(1 - t) if isinstance(t, float) else (1 - t).abs()
                inner = (du * ((t * w).abs() + abs_1mt * u + c1)).sum(dim=d, keepdim=True)
                return -s, du.sum(dim=d, keepdim=True), 2 + inner

            mu = solve_increasing(s_and_ds, mu_lo, mu_lo, mu_hi)
            u = torch.exp(log_u(mu))
            return u / u.sum(dim=d, keepdim=True)
