"""The regulariser base class and its helpers (MATH.md §3.2, §4).

A room of ``lbi_engine.regularisers`` (import from there): the split
alpha R(x) = h(alpha K x) + alpha g(x) with an optional interval constraint lo <= x <= hi,
the defaults for regularisers without a dual part (K = 0, prox_{h*} = 0), and the per-sample
step/alpha broadcasting shared by every kind. Kept apart so the concrete kinds
(``_gradient``, ``_pointwise``) and the factory each stay short.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any

import torch
from torch import Tensor

from lbi_engine.errors import InputError

__all__ = ["CONSTRAINT_TOL", "Regulariser"]

#: Slack when ``value`` tests a constraint: prox_primal clips exactly (no slack needed), but
#: user arrays carry rounding, e.g. a centred float32 MNIST image x - c overshoots the box
#: [-c, 1 - c] by ~1 ulp (6e-8). Relative to max(1, |bound|).
CONSTRAINT_TOL = 1e-6


def _per_sample(t: float | Tensor, x: Tensor, what: str, positive: bool) -> float | Tensor:
    """A step or alpha: a number, or a (B,) tensor broadcast over the non-batch dims."""
    if isinstance(t, Tensor):
        if t.ndim == 0:
            return t.to(dtype=x.dtype, device=x.device)
        if t.ndim == 1 and t.shape[0] == x.shape[0]:
            return t.to(dtype=x.dtype, device=x.device).view(-1, *([1] * (x.ndim - 1)))
        raise InputError(
            f"{what} has shape {tuple(t.shape)}; give a number or one value per sample "
            f"(shape ({x.shape[0]},))."
        )
    try:
        value = float(t)
    except (TypeError, ValueError):
        raise InputError(f"{what}={t!r}: must be a number.") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        rule = "> 0" if positive else ">= 0"
        raise InputError(f"{what}={t}: must be a finite number {rule}.")
    return value


# -- the base class ------------------------------------------------------------------------------
class Regulariser(ABC):
    """alpha R(x) = h(alpha K x) + alpha g(x) plus an optional interval constraint [lo, hi]."""

    name: str = ""
    has_dual: bool = False
    #: R(t x) = t R(x) for t > 0, hence <q, x> = R(x) for every q in dR(x) (MATH.md §8.3)
    homogeneous: bool = False
    #: the constraint the regulariser has by itself (nonneg: [0, inf)); extras go in spec()
    _intrinsic: tuple[float, float] = (-math.inf, math.inf)

    def __init__(self, lo: float = -math.inf, hi: float = math.inf) -> None:
        self.lo = float(lo)
        self.hi = float(hi)

    # -- constraint -----------------------------------------------------------------------------
    @property
    def constrained(self) -> bool:
        return self.lo > -math.inf or self.hi < math.inf

    def _clip(self, x: Tensor) -> Tensor:
        if not self.constrained:
            return x
        return x.clamp(min=self.lo if self.lo > -math.inf else None,
                       max=self.hi if self.hi < math.inf else None)

    def feasible(self, x: Tensor) -> Tensor:
        """(B,) bool: lo - tol <= x <= hi + tol everywhere (tol: see CONSTRAINT_TOL)."""
        ok = torch.ones(x.shape[0], dtype=torch.bool, device=x.device)
        flat = x.flatten(1)
        if self.lo > -math.inf:
            ok &= (flat >= self.lo - CONSTRAINT_TOL * max(1.0, abs(self.lo))).all(dim=1)
        if self.hi < math.inf:
            ok &= (flat <= self.hi + CONSTRAINT_TOL * max(1.0, abs(self.hi))).all(dim=1)
        return ok

    # -- values ---------------------------------------------------------------------------------
    @abstractmethod
    def raw_value(self, x: Tensor) -> Tensor:
        """(B,) R(x) ignoring the constraint (used by symmetric Bregman distances)."""

    def value(self, x: Tensor) -> Tensor:
        """(B,) R(x) without alpha; +inf for samples that violate the constraint."""
        v = self.raw_value(x)
        if self.constrained:
            v = torch.where(self.feasible(x), v, torch.full_like(v, math.inf))
        return v

    def alpha_value(self, x: Tensor, alpha: float | Tensor) -> Tensor:
        """(B,) alpha R(x); a violated constraint gives +inf even for alpha = 0 (no 0 * inf)."""
        v = self.value(x)
        a = alpha.to(v) if isinstance(alpha, Tensor) else float(alpha)
        return torch.where(torch.isinf(v), v, a * torch.nan_to_num(v, posinf=0.0))

    # -- the dual part h(alpha K x) ---------------------------------------------------------------
    def K(self, x: Tensor) -> Tensor:  # the operator's conventional name
        """Dual-shaped K x; the zero map (shape of x) when there is no dual part."""
        return torch.zeros_like(x)

    def KT(self, p: Tensor) -> Tensor:
        """x-shaped K^T p."""
        return torch.zeros_like(p)

    def K_norm_sq(self, x_shape: tuple[int, ...]) -> float:
        """||K||^2 for images of shape x_shape (batch optional: only the last two dims count)."""
        return 0.0

    def prox_dual(self, p: Tensor, step: float | Tensor, alpha: float | Tensor) -> Tensor:
        """prox_{step h*}(p); h = 0 here, so h* = indicator of {0} and the prox is 0."""
        return torch.zeros_like(p)

    # -- the primal part alpha g(x) + constraint ------------------------------------------------
    @property
    def g_is_zero(self) -> bool:
        """Whether g = 0, so that the primal prox is the constraint's projection alone (a
        subclass with a g overrides ``_prox_g``)."""
        return type(self)._prox_g is Regulariser._prox_g

    def _prox_g(self, x: Tensor, t: float | Tensor) -> Tensor:
        """prox_{t g}(x) without the constraint; g = 0 unless a subclass overrides."""
        return x

    def prox_primal(self, x: Tensor, step: float | Tensor, alpha: float | Tensor) -> Tensor:
        """prox_{step alpha g + iota_[lo,hi]}(x) = clip(prox_{step alpha g}(x), lo, hi).

        Exact because g is separable with convex 1-D pieces: a convex function of one
        variable restricted to an interval is minimised at the projection of its
        unconstrained minimiser (it is monotone on each side of that minimiser), and
        ½(u - v)^2 + t g(u) is such a function per coordinate.
        """
        t = _per_sample(step, x, "step", True)
        a = _per_sample(alpha, x, "alpha", False)
        return self._clip(self._prox_g(x, t * a))

    @abstractmethod
    def subgradient(self, x: Tensor) -> Tensor:
        """An element of dR(x) (constraint ignored: 0 lies in every normal cone)."""

    # -- description ----------------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        return {}

    def spec(self) -> dict:
        """JSON-safe ``{"name": ..., ...}``; ``make_regulariser(spec)`` rebuilds an equal one."""
        out: dict[str, Any] = {"name": self.name, **self._params()}
        if (self.lo, self.hi) != self._intrinsic:
            if self.lo == 0.0 and self.hi == math.inf:
                out["nonneg"] = True
            else:
                out["box"] = [_json_bound(self.lo), _json_bound(self.hi)]
        return out

    def describe(self) -> str:
        """Short human-readable label, e.g. ``tv + box [0, 1]``."""
        text = f"box [{self.lo:g}, {self.hi:g}]" if self.name == "box" else self.name
        if (self.lo, self.hi) != self._intrinsic:
            both = self.lo == 0.0 and self.hi == math.inf
            text += " + nonneg" if both else f" + box [{self.lo:g}, {self.hi:g}]"
        return text

    def __repr__(self) -> str:
        return f"Regulariser({self.spec()!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Regulariser) and self.spec() == other.spec()

    def __hash__(self) -> int:
        return hash(repr(self))


def _json_bound(b: float) -> float | None:
    """JSON has no infinity: an unbounded side is written as null."""
    return None if math.isinf(b) else b
