"""Smooth proximal activations whose prox is found by the root solver (MATH.md §2.2, §2.3).

A room of ``lbi_engine.activations._kinds`` (import from ``lbi_engine.activations``): sigmoid,
tanh, softplus, ELU and softsign. Each B_Psi is written in BCE-with-logits form (sigmoid,
tanh), through the dilogarithm (softplus) or as a sum of terms >= 0 (ELU, softsign), so that
float32 does not lose the loss to cancellation of 1/2 x^2 + 1/2 z^2 - x z.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from lbi_engine.activations._base import RootProxActivation, Step, softplus, xlogx
from lbi_engine.activations._dilog import PI2_6, li2
from lbi_engine.activations._params import LN2, number_param, sign_parts, unit_slope_param
from lbi_engine.errors import InputError

__all__ = ["Sigmoid", "Tanh", "Softplus", "ELU", "Softsign"]


class Sigmoid(RootProxActivation):
    """sigma = 1/(1 + e^-z); psi = x log x + (1-x) log(1-x) - x^2/2 on [0, 1]; B = Bernoulli KL."""

    name = "sigmoid"
    lower, upper = 0.0, 1.0

    def sigma(self, z: Tensor) -> Tensor:
        return torch.sigmoid(z)

    def _dsigma(self, z: Tensor) -> Tensor:
        s = torch.sigmoid(z)
        return s * (1 - s)

    def _psi_terms(self, x: Tensor) -> Tensor:
        return xlogx(x) + xlogx(1 - x) - 0.5 * x * x

    def _conjugate_terms(self, z: Tensor) -> Tensor:
        return softplus(z)

    def _bregman_terms(self, x: Tensor, z: Tensor) -> Tensor:
        # BCE-with-logits minus the entropy of x: sp(z) - xz = x sp(-z) + (1 - x) sp(z).
        return xlogx(x) + xlogx(1 - x) + x * softplus(-z) + (1 - x) * softplus(z)


class Tanh(RootProxActivation):
    """sigma = tanh; psi = (1+x)/2 log(1+x) + (1-x)/2 log(1-x) - x^2/2 on [-1, 1]."""

    name = "tanh"
    lower, upper = -1.0, 1.0

    def sigma(self, z: Tensor) -> Tensor:
        return torch.tanh(z)

    def _dsigma(self, z: Tensor) -> Tensor:
        return 1 - torch.tanh(z) ** 2

    def _psi_terms(self, x: Tensor) -> Tensor:
        return 0.5 * (xlogx(1 + x) + xlogx(1 - x)) - 0.5 * x * x

    def _conjugate_terms(self, z: Tensor) -> Tensor:
        a = z.abs()
        return a + torch.log1p(torch.exp(-2 * a)) - LN2

    def _bregman_terms(self, x: Tensor, z: Tensor) -> Tensor:
        # B_tanh(x, z) = B_sigmoid((1 + x)/2, 2z) (MATH.md §2.3).
        p, q = 0.5 * (1 + x), 0.5 * (1 - x)
        return xlogx(p) + xlogx(q) + p * softplus(-2 * z) + q * softplus(2 * z)


def _softplus_psi(x: Tensor) -> Tensor:
    """psi(x) = Li2(e^-x), x >= 0, accurate at both ends (psi(0) = pi^2/6)."""
    return _softplus_psi_shifted(x, PI2_6)


def _softplus_psi_shifted(x: Tensor, shift: float = 0.0) -> Tensor:
    """Li2(e^-x) - pi^2/6 + shift; near 0 via Li2(e^-x) = pi^2/6 + x log(1-e^-x) - Li2(1-e^-x)."""
    small = x < LN2
    xs = torch.where(small, x, torch.zeros_like(x))
    y = -torch.expm1(-xs)  # 1 - e^-x, exact near 0
    val_small = torch.xlogy(xs, y) - li2(y) + shift
    xl = torch.where(small, torch.ones_like(x), x)
    val_large = li2(torch.exp(-xl)) + (shift - PI2_6)
    return torch.where(small, val_small, val_large)


class Softplus(RootProxActivation):
    """sigma = log(1 + e^(beta z)) / beta; psi(x) = Li2(e^(-beta x)) / beta^2 on [0, inf).

    beta = 1 is the table entry of MATH.md §2.2; other beta rescale it (torch's Softplus(beta)),
    since sigma_beta(z) = sigma(beta z)/beta gives B_beta(x, z) = B(beta x, beta z)/beta^2.
    """

    name = "softplus"
    lower = 0.0

    def __init__(self, beta: float = 1.0) -> None:
        beta = number_param("softplus", "beta", beta)
        if beta <= 0:
            raise InputError(f"softplus: beta={beta!r} must be > 0.")
        self.beta = beta

    def _params(self) -> dict[str, Any]:
        return {"beta": self.beta}

    def sigma(self, z: Tensor) -> Tensor:
        return softplus(self.beta * z) / self.beta

    def _dsigma(self, z: Tensor) -> Tensor:
        return torch.sigmoid(self.beta * z)

    def _psi_terms(self, x: Tensor) -> Tensor:
        return _softplus_psi(self.beta * x) / self.beta**2

    @staticmethod
    def _conj_unit(z: Tensor) -> Tensor:
        """F*(z) = -Li2(-e^z) - pi^2/6; for z > 0 the stable z^2/2 + Li2(-e^-z)."""
        pos = z > 0
        zp = torch.where(pos, z, torch.ones_like(z))
        zn = torch.where(pos, torch.zeros_like(z), z)
        return torch.where(pos, 0.5 * zp * zp + li2(-torch.exp(-zp)),
                           -li2(-torch.exp(zn)) - PI2_6)

    def _conjugate_terms(self, z: Tensor) -> Tensor:
        return self._conj_unit(self.beta * z) / self.beta**2

    def _bregman_terms(self, x: Tensor, z: Tensor) -> Tensor:
        bx, bz = self.beta * x, self.beta * z
        pos = bz > 0
        zp = torch.where(pos, bz, torch.ones_like(bz))
        zn = torch.where(pos, torch.zeros_like(bz), bz)
        # z > 0: (x - z)^2/2 + psi(x) + Li2(-e^-z), no 1/2 x^2 + 1/2 z^2 - xz cancellation.
        b_pos = 0.5 * (bx - zp) ** 2 + _softplus_psi(bx) + li2(-torch.exp(-zp))
        # z <= 0: every piece is O(1) or small; psi - pi^2/6 and F* + pi^2/6 avoid the constant.
        b_neg = 0.5 * bx * bx - bx * zn + _softplus_psi_shifted(bx) - li2(-torch.exp(zn))
        return torch.where(pos, b_pos, b_neg) / self.beta**2


class ELU(RootProxActivation):
    """sigma = z (z > 0), alpha (e^z - 1) (z <= 0), 0 < alpha <= 1; dom psi = [-alpha, inf)."""

    name = "elu"

    def __init__(self, alpha: float = 1.0) -> None:
        alpha = unit_slope_param(
            "elu", "alpha", alpha, "for alpha > 1 the slope alpha e^z exceeds 1 just below 0, "
            "so it is not a proximal map")
        self.alpha = alpha
        self.lower = -alpha

    def _params(self) -> dict[str, Any]:
        return {"alpha": self.alpha}

    def sigma(self, z: Tensor) -> Tensor:
        return torch.where(z > 0, z, self.alpha * torch.expm1(z.clamp_max(0)))

    def _dsigma(self, z: Tensor) -> Tensor:
        return torch.where(z > 0, torch.ones_like(z), torch.exp(z.clamp_max(0)))

    def _neg_part_f(self, xm: Tensor) -> Tensor:
        """1/2 x^2 + psi(x) at x = -xm, 0 <= xm <= alpha: (alpha - xm) log(1 - xm/alpha) + xm."""
        a = self.alpha
        inner = xm < a
        xs = torch.where(inner, xm, torch.zeros_like(xm))
        log_term = torch.where(inner, (a - xs) * torch.log1p(-xs / a), torch.zeros_like(xm))
        return log_term + xm

    def _psi_terms(self, x: Tensor) -> Tensor:
        xm = (-x).clamp_min(0)
        return self._neg_part_f(xm) - 0.5 * xm * xm

    def _conjugate_terms(self, z: Tensor) -> Tensor:
        m = z.clamp_max(0)
        return 0.5 * z.clamp_min(0) ** 2 + self.alpha * (torch.expm1(m) - m)

    def _bregman_terms(self, x: Tensor, z: Tensor) -> Tensor:
        (xp, xm), (zp, zm) = sign_parts(x), sign_parts(z)
        # Split by signs: the negative parts form the scalar Bregman loss G(xm, zm) >= 0.
        g = self._neg_part_f(xm) + self.alpha * (torch.expm1(-zm) + zm) - xm * zm
        return 0.5 * (xp - zp) ** 2 + xp * zm + xm * zp + g

    def _prox(self, v: Tensor, t: Step) -> Tensor:
        # psi = 0 on x > 0, so prox is v there; the root formula handles v < 0.
        return torch.where(v >= 0, v, super()._prox(v, t))


class Softsign(RootProxActivation):
    """sigma = z / (1 + |z|); psi = -|x| - log(1 - |x|) - x^2/2 on the open (-1, 1)."""

    name = "softsign"
    lower, upper = -1.0, 1.0
    lower_open = upper_open = True

    def sigma(self, z: Tensor) -> Tensor:
        return z / (1 + z.abs())

    def _dsigma(self, z: Tensor) -> Tensor:
        return 1.0 / (1 + z.abs()) ** 2

    def _psi_terms(self, x: Tensor) -> Tensor:
        a = x.abs()
        return -a - torch.log1p(-a) - 0.5 * x * x

    def _conjugate_terms(self, z: Tensor) -> Tensor:
        a = z.abs()
        return a - torch.log1p(a)

    def _bregman_terms(self, x: Tensor, z: Tensor) -> Tensor:
        ax, az = x.abs(), z.abs()
        # With p = (1 - |x|)(1 + |z|) > 0: B = (p - 1 - log p) + (|x||z| - xz), both >= 0.
        # 1 - |x| is exact, so p keeps full relative accuracy when |x| is close to 1.
        p = (1 - ax) * (1 + az)
        return (p - 1 - torch.log(p)) + (ax * az - x * z)
