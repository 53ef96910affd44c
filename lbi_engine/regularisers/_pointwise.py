"""Pointwise regularisers: g acts coordinate by coordinate and there is no dual part.

A room of ``lbi_engine.regularisers`` (import from there): Tikhonov, l1 and the pure
constraints (none, nonneg, box). Their primal prox is separable, so the constraint clip in
``Regulariser.prox_primal`` stays exact (see its docstring), and PDHG needs no dual variable.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from lbi_engine.regularisers._base import Regulariser, _json_bound

__all__ = ["Tikhonov", "L1", "Constraint"]


class Tikhonov(Regulariser):
    """R(x) = ½||x||^2 in g: prox_{t g}(v) = v / (1 + t)."""

    name = "tikhonov"

    def raw_value(self, x: Tensor) -> Tensor:
        return 0.5 * x.square().flatten(1).sum(dim=1)

    def _prox_g(self, x: Tensor, t: float | Tensor) -> Tensor:
        return x / (1.0 + t)

    def subgradient(self, x: Tensor) -> Tensor:
        return x.clone()


class L1(Regulariser):
    """R(x) = ||x||_1 in g: prox is soft-shrinkage by t."""

    name = "l1"
    homogeneous = True

    def raw_value(self, x: Tensor) -> Tensor:
        return x.abs().flatten(1).sum(dim=1)

    def _prox_g(self, x: Tensor, t: float | Tensor) -> Tensor:
        return torch.sign(x) * (x.abs() - t).clamp_min(0.0)

    def subgradient(self, x: Tensor) -> Tensor:
        return torch.sign(x)


class Constraint(Regulariser):
    """R = 0 with an interval constraint: none, nonneg ([0, inf)) or box([lo, hi]).

    alpha is irrelevant; value() is 0 on the set and +inf off it.
    """

    homogeneous = True

    def __init__(self, name: str, lo: float = -math.inf, hi: float = math.inf) -> None:
        super().__init__(lo, hi)
        self.name = name
        self._intrinsic = (self.lo, self.hi) if name == "box" else \
            ((0.0, math.inf) if name == "nonneg" else (-math.inf, math.inf))

    def raw_value(self, x: Tensor) -> Tensor:
        return torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)

    def subgradient(self, x: Tensor) -> Tensor:
        return torch.zeros_like(x)

    def _params(self) -> dict[str, Any]:
        return {"lo": _json_bound(self.lo), "hi": _json_bound(self.hi)} if self.name == "box" \
            else {}

