"""Piecewise-linear and piecewise-quadratic proximal activations (MATH.md §2.2).

A room of ``lbi_engine.activations._kinds`` (import from ``lbi_engine.activations``):
identity, ReLU, leaky ReLU, clip, soft-shrink and hard-sigmoid. Their prox has a closed form
(a clamp, a shrink or a scaled branch), so none needs the root solver of
``RootProxActivation``; each B_Psi is written as a sum of terms >= 0 for float32 accuracy.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from lbi_engine.activations._base import ProximalActivation, Step
from lbi_engine.activations._params import number_param, sign_parts, unit_slope_param
from lbi_engine.errors import InputError

__all__ = ["Identity", "ReLU", "LeakyReLU", "Clip", "SoftShrink", "HardSigmoid"]


class Identity(ProximalActivation):
    """sigma(z) = z, psi = 0 (a linear layer): B = ||x - z||^2 / 2."""

    name = "identity"

    def sigma(self, z: Tensor) -> Tensor:
        return z.clone()

    def _psi_terms(self, x: Tensor) -> Tensor:
        return torch.zeros_like(x)

    def _conjugate_terms(self, z: Tensor) -> Tensor:
        return 0.5 * z * z

    def _bregman_terms(self, x: Tensor, z: Tensor) -> Tensor:
        return 0.5 * (x - z) ** 2

    def _prox(self, v: Tensor, t: Step) -> Tensor:
        return v.clone()


class ReLU(ProximalActivation):
    """sigma(z) = max(z, 0), psi = indicator of [0, inf)."""

    name = "relu"
    lower = 0.0

    def sigma(self, z: Tensor) -> Tensor:
        return z.clamp_min(0)

    def _psi_terms(self, x: Tensor) -> Tensor:
        return torch.zeros_like(x)

    def _conjugate_terms(self, z: Tensor) -> Tensor:
        return 0.5 * z.clamp_min(0) ** 2

    def _bregman_terms(self, x: Tensor, z: Tensor) -> Tensor:
        # 1/2 (x - z_+)^2 + x z_-: both terms >= 0 for x >= 0.
        return 0.5 * (x - z.clamp_min(0)) ** 2 + x * (-z).clamp_min(0)

    def bregman_in_domain(self, x: Tensor, z: Tensor) -> Tensor:
        """The same sum as two batched dot products, 1/2 <x - z_+, x - z_+> + <x, z_->:
        five passes over the layer instead of nine (the joint method's records on a
        128x128 resnet18 slice sum 2M of these every five steps)."""
        batch = z.shape[0]
        xs, zs = x.reshape(batch, 1, -1), z.reshape(batch, 1, -1)
        gap = xs - zs.clamp_min(0)
        square = torch.bmm(gap, gap.transpose(1, 2)).reshape(batch)
        cross = torch.bmm(xs, zs.clamp_max(0).transpose(1, 2)).reshape(batch)
        return (0.5 * square - cross).clamp_min(0)

    def _prox(self, v: Tensor, t: Step) -> Tensor:
        return v.clamp_min(0)


class LeakyReLU(ProximalActivation):
    """sigma(z) = z (z >= 0), a z (z < 0), 0 < a <= 1; psi = (1 - a)/(2a) min(x, 0)^2."""

    name = "leaky_relu"

    def __init__(self, a: float = 0.01) -> None:
        self.a = unit_slope_param(
            "leaky_relu", "a", a, "a > 1 makes the map steeper than 1, a < 0 makes it "
            "non-monotone: not a proximal map", label="slope a")

    def _params(self) -> dict[str, Any]:
        return {"a": self.a}

    def sigma(self, z: Tensor) -> Tensor:
        return torch.where(z >= 0, z, self.a * z)

    def _psi_terms(self, x: Tensor) -> Tensor:
        return (1 - self.a) / (2 * self.a) * x.clamp_max(0) ** 2

    def _conjugate_terms(self, z: Tensor) -> Tensor:
        return 0.5 * z.clamp_min(0) ** 2 + 0.5 * self.a * z.clamp_max(0) ** 2

    def _bregman_terms(self, x: Tensor, z: Tensor) -> Tensor:
        (xp, xm), (zp, zm) = sign_parts(x), sign_parts(z)
        # F(x) + F*(z) - xz split by signs; every term is >= 0.
        return (0.5 * (xp - zp) ** 2 + (xm - self.a * zm) ** 2 / (2 * self.a)
                + xp * zm + xm * zp)

    def _prox(self, v: Tensor, t: Step) -> Tensor:
        return torch.where(v >= 0, v, self.a * v / (self.a + t * (1 - self.a)))


class Clip(ProximalActivation):
    """sigma = clamp(z, lo, hi), psi = indicator of [lo, hi] (hardtanh: [-1, 1], ReLU6: [0, 6]).

    ``lo``/``hi`` may be None for an unbounded side.
    """

    name = "clip"

    def __init__(self, lo: float | None = -1.0, hi: float | None = 1.0) -> None:
        self.lo = None if lo is None else number_param("clip", "lo", lo)
        self.hi = None if hi is None else number_param("clip", "hi", hi)
        if self.lo is not None and self.hi is not None and not self.lo < self.hi:
            raise InputError(f"clip: lo={self.lo!r} must be < hi={self.hi!r}; swap them or "
                             "widen the interval.")
        self.lower = -math.inf if self.lo is None else self.lo
        self.upper = math.inf if self.hi is None else self.hi

    def _params(self) -> dict[str, Any]:
        return {"lo": self.lo, "hi": self.hi}

    def sigma(self, z: Tensor) -> Tensor:
        return z.clamp(min=self.lo, max=self.hi)

    def _psi_terms(self, x: Tensor) -> Tensor:
        return torch.zeros_like(x)

    def _conjugate_terms(self, z: Tensor) -> Tensor:
        c = self.sigma(z)
        return z * c - 0.5 * c * c

    def _bregman_terms(self, x: Tensor, z: Tensor) -> Tensor:
        c = self.sigma(z)
        return 0.5 * (x - c) ** 2 + (z - c) * (c - x)

    def _prox(self, v: Tensor, t: Step) -> Tensor:
        return self.sigma(v)


class SoftShrink(ProximalActivation):
    """sigma = S_lam(z) = sign(z) (|z| - lam)_+, psi = lam |x|, lam > 0."""

    name = "soft_shrink"

    def __init__(self, lam: float = 0.5) -> None:
        lam = number_param("soft_shrink", "lam", lam)
        if lam <= 0:
            raise InputError(f"soft_shrink: lam={lam!r} must be > 0 (lam = 0 is 'identity').")
        self.lam = lam

    def _params(self) -> dict[str, Any]:
        return {"lam": self.lam}

    @staticmethod
    def _shrink(z: Tensor, lam: Step) -> Tensor:
        return torch.sign(z) * (z.abs() - lam).clamp_min(0)

    def sigma(self, z: Tensor) -> Tensor:
        return self._shrink(z, self.lam)

    def _psi_terms(self, x: Tensor) -> Tensor:
        return self.lam * x.abs()

    def _conjugate_terms(self, z: Tensor) -> Tensor:
        return 0.5 * self.sigma(z) ** 2

    def _bregman_terms(self, x: Tensor, z: Tensor) -> Tensor:
        s = self.sigma(z)
        # p = z - s is in lam d|.|(s), so lam |x| - p x >= 0 is the Bregman part.
        return 0.5 * (x - s) ** 2 + (self.lam * x.abs() - (z - s) * x)

    def _prox(self, v: Tensor, t: Step) -> Tensor:
        return self._shrink(v, t * self.lam)


class HardSigmoid(ProximalActivation):
    """sigma = clamp(z/6 + 1/2, 0, 1) (torch's Hardsigmoid); psi = 5/2 x^2 - 3x on [0, 1]."""

    name = "hard_sigmoid"
    lower, upper = 0.0, 1.0

    def sigma(self, z: Tensor) -> Tensor:
        return (z / 6 + 0.5).clamp(0, 1)

    def _psi_terms(self, x: Tensor) -> Tensor:
        return 2.5 * x * x - 3 * x

    def _conjugate_terms(self, z: Tensor) -> Tensor:
        mid = (z + 3) ** 2 / 12
        return torch.where(z <= -3, torch.zeros_like(z), torch.where(z >= 3, z, mid))

    def _bregman_terms(self, x: Tensor, z: Tensor) -> Tensor:
        c = self.sigma(z)
        # 1/2 (x-c)^2 + D_psi: (x - c)(6c - 3 - z) >= 0 (zero inside, normal cone at 0 and 1).
        return 3 * (x - c) ** 2 + (x - c) * (6 * c - 3 - z)

    def _prox(self, v: Tensor, t: Step) -> Tensor:
        # argmin 1/2 (u - v)^2 + t (5/2 u^2 - 3u) on [0, 1].
        return ((v + 3 * t) / (1 + 5 * t)).clamp(0, 1)
