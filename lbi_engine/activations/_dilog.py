"""Real dilogarithm Li2 in torch (PyTorch has none; the softplus activation needs it).

``Li2(u) = -int_0^u log(1 - s) / s ds`` for real ``u <= 1``; SciPy's equivalent is
``scipy.special.spence(1 - u)``. The argument is reduced to ``[-1, 1/2]`` with the inversion and
reflection formulas, where the Bernoulli series in ``w = -log(1 - u)`` (``|w| <= log 2``)
converges fast: twelve terms reach float64 round-off. Everything is elementwise torch
arithmetic, so it runs batched on any device, in float32 or float64, and is differentiable
(branches are fed safe arguments, so unused branches never produce NaN gradients).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

PI2_6 = math.pi**2 / 6.0

# B_{2k} / (2k+1)!, k = 1..12 (Bernoulli numbers): Li2(u) = w - w^2/4 + sum_k c_k w^(2k+1).
# The ratio of consecutive terms is about (w / 2 pi)^2 <= 0.0122 for |w| <= log 2.
_BERNOULLI_COEFFS = (
    0.027777777777777776,
    -0.0002777777777777778,
    4.72411186696901e-06,
    -9.185773074661964e-08,
    1.8978869988971e-09,
    -4.0647616451442256e-11,
    8.921691020456452e-13,
    -1.9939295860721074e-14,
    4.518980029619918e-16,
    -1.0356517612181247e-17,
    2.395218621026187e-19,
    -5.581785874325009e-21,
)


def _li2_core(y: Tensor) -> Tensor:
    """Li2(y) for y in [-1, 1/2] by the Bernoulli series (accurate to round-off there)."""
    w = -torch.log1p(-y)
    w2 = w * w
    acc = torch.zeros_like(w)
    for c in reversed(_BERNOULLI_COEFFS):
        acc = acc * w2 + c
    return w - 0.25 * w2 + w * w2 * acc


def li2(u: Tensor) -> Tensor:
    """Real dilogarithm ``Li2(u)`` elementwise for ``u <= 1`` (NaN for ``u > 1``: complex there).

    ``Li2(1) = pi^2/6``, ``Li2(0) = 0``, ``Li2(-1) = -pi^2/12``, ``Li2(u) ~ -log(-u)^2/2`` as
    ``u -> -inf``. Relative accuracy is a few ulps of the input dtype on the whole range.
    """
    u = torch.as_tensor(u)
    if not torch.is_floating_point(u):
        u = u.to(torch.get_default_dtype())
    far_neg = u < -1.0
    near_one = u > 0.5
    middle = ~(far_neg | near_one)

    # u < -1: Li2(u) = -pi^2/6 - log(-u)^2 / 2 - Li2(1/u), with 1/u in (-1, 0).
    u_neg = torch.where(far_neg, u, torch.full_like(u, -2.0))
    log_neg = torch.log(-u_neg)
    val_neg = -PI2_6 - 0.5 * log_neg * log_neg - _li2_core(1.0 / u_neg)

    # 1/2 < u <= 1: Li2(u) = pi^2/6 - log(u) log(1 - u) - Li2(1 - u); 1 - u is exact here.
    u_one = torch.where(near_one, u, torch.full_like(u, 0.75))
    y = 1.0 - u_one
    y_safe = torch.where(y > 0, y, torch.ones_like(y))
    # log(u) log(1-u) -> 0 as u -> 1; log1p(-y) keeps log(u) accurate near 1.
    prod = torch.where(y > 0, torch.log1p(-y_safe) * torch.log(y_safe), torch.zeros_like(y))
    val_one = PI2_6 - prod - _li2_core(torch.where(y > 0, y, torch.zeros_like(y)))

    u_mid = torch.where(middle, u, torch.zeros_like(u))
    val_mid = _li2_core(u_mid)

    out = torch.where(far_neg, val_neg, torch.where(near_one, val_one, val_mid))
    return torch.where(u > 1.0, torch.full_like(u, math.nan), out)
