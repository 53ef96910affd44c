"""Regularisers with a dual part K = grad: TV (isotropic, anisotropic) and gradient-Tikhonov.

A room of ``lbi_engine.regularisers`` (import from there). Both act through the image
gradient of ``lbi_engine.operators.finite_differences``, so PDHG handles them with the operator
L = alpha grad and a dual prox (MATH.md §4.1, §4.2); the shared operator lives in
``_GradientDual`` so the two kinds cannot drift apart.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from lbi_engine.operators.finite_differences import (
    check_image,
    div,
    grad,
    grad_norm_sq,
    pixel_norm,
    tv_aniso_value,
    tv_iso_value,
)
from lbi_engine.regularisers._base import Regulariser, _per_sample
from lbi_engine.regularisers._tv_prox import INNER_MAX, THETA, TVProx

__all__ = ["TotalVariation", "GradientTikhonov"]


class _GradientDual(Regulariser):
    """K = grad, K^T = -div and ||K||^2 in closed form: the dual part TV and H1 share."""

    has_dual = True

    def K(self, x: Tensor) -> Tensor:  # the operator's conventional name
        check_image(x)
        return grad(x)

    def KT(self, p: Tensor) -> Tensor:
        return -div(p)

    def K_norm_sq(self, x_shape: tuple[int, ...]) -> float:
        return grad_norm_sq(tuple(x_shape))


class TotalVariation(_GradientDual):
    """TV (isotropic: pixelwise Euclidean norm over the 2*C components) or anisotropic (l1)."""

    homogeneous = True

    def __init__(self, isotropic: bool = True, lo: float = -math.inf,
                 hi: float = math.inf) -> None:
        super().__init__(lo, hi)
        self.isotropic = isotropic
        self.name = "tv" if isotropic else "tv-aniso"

    def raw_value(self, x: Tensor) -> Tensor:
        return tv_iso_value(x) if self.isotropic else tv_aniso_value(x)

    def prox_dual(self, p: Tensor, step: float | Tensor, alpha: float | Tensor) -> Tensor:
        """Projection onto the dual unit ball (h* is its indicator; step, alpha irrelevant)."""
        if not self.isotropic:
            return p.clamp(-1.0, 1.0)
        # plain sqrt: no autograd here, and the clamp makes the value at 0 irrelevant
        scale = (p * p).sum(dim=tuple(range(1, p.ndim - 2)), keepdim=True).sqrt()
        scale = scale.clamp_min(1.0)
        return p / scale

    def dual_certificate(self, x: Tensor) -> Tensor:
        """z in the dual ball with -div z in dTV(x): grad x normalised (0 where flat)."""
        g = self.K(x)
        if not self.isotropic:
            return torch.sign(g)
        n = pixel_norm(g, keepdim=True)
        return torch.where(n > 0, g / torch.where(n > 0, n, torch.ones_like(n)),
                           torch.zeros_like(g))

    def subgradient(self, x: Tensor) -> Tensor:
        return -div(self.dual_certificate(x))

    def fgp(self, batch: int, image_shape: tuple[int, ...], like: Tensor,
            compiled: bool | None = None, theta: float = THETA,
            inner_max: int = INNER_MAX) -> TVProx:
        """The prox of lam (TV + box) for ``batch`` images of ``image_shape`` in ``like``'s
        dtype and device, by FGP on buffers made once (``_tv_prox``). The backend, compiled
        (numba, CPU) or torch, is chosen here once; ``theta`` and ``inner_max`` set its
        accuracy (``_tv_prox``)."""
        return TVProx(self.isotropic, self.lo, self.hi, batch, image_shape, like.dtype,
                      like.device, compiled, theta=theta, inner_max=inner_max)

    def prox(self, x: Tensor, lam: float, compiled: bool | None = None) -> Tensor:
        """prox_{lam (TV + box)}(x) to rounding (FGP from 0 until its duality gap is at
        rounding level) for images x ``(B, *image_shape)``: for tests and scripts; the
        solvers keep a :meth:`fgp` object and its warm-started dual."""
        prox = self.fgp(int(x.shape[0]), tuple(x.shape[1:]), x, compiled, theta=0.0,
                        inner_max=100_000)
        prox.v.copy_(x)
        prox.y.copy_(x)
        prox(float(lam))
        return prox.u.clone()


class GradientTikhonov(_GradientDual):
    """R(x) = ½||grad x||^2 as h(alpha grad x) with h(u) = ||u||^2 / (2 alpha) (MATH.md §4.2)."""

    name = "gradient-tikhonov"

    def raw_value(self, x: Tensor) -> Tensor:
        check_image(x)
        return 0.5 * grad(x).square().flatten(1).sum(dim=1)

    def prox_dual(self, p: Tensor, step: float | Tensor, alpha: float | Tensor) -> Tensor:
        """h*(v) = alpha/2 ||v||^2, so prox_{step h*}(v) = v / (1 + step alpha)."""
        t = _per_sample(step, p, "step", True)
        a = _per_sample(alpha, p, "alpha", True)
        return p / (1.0 + t * a)

    def subgradient(self, x: Tensor) -> Tensor:
        return -div(grad(x))
