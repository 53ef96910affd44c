"""Regularisers R for the input x_0, split for a Condat–Vũ PDHG (MATH.md §3.2, §4).

A solver minimises f(x) + alpha R(x) with

    alpha R(x) = h(alpha K x) + alpha g(x),

so that PDHG uses the linear operator L = alpha K, the dual prox prox_{step h*} and the primal
prox prox_{step alpha g}. Putting alpha into L (not into h*) is the correct saddle form
(MATH.md §3.1, [TYPO 1]); for TV, h* is then an indicator and its prox does not depend on
alpha or the step. Per regulariser (h, K | g):

    tv                 h = ||.||_{2,1} (pixelwise Euclidean over 2*C comps), K = grad | g = 0
    tv-aniso           h = ||.||_1, K = grad                                         | g = 0
    gradient-tikhonov  h(u) = ||u||^2/(2 alpha), K = grad: h(alpha K x) = alpha/2 ||grad x||^2
    tikhonov           no h                                                | g = ½||x||^2
    l1                 no h                                                | g = ||x||_1
    nonneg, box, none  no h                                       | g = indicator of the set, 0

Any regulariser can carry an interval constraint lo <= x <= hi ("tv+nonneg",
``{"name": "tv", "box": [0, 1]}``), applied inside ``prox_primal``. Regularisers without a
dual part have K = 0 (same shape as x), h = 0 and prox_{h*} = 0, so a solver that ignores
``has_dual`` still computes the right thing.

Images are ``(B, H, W)`` or ``(B, C, H, W)``; the gradient acts on the last two dims and has
shape ``(B, 2, *image_shape)`` (see ``lbi_engine.finite_differences``).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from lbi_engine.errors import InputError
from lbi_engine.finite_differences import (
    check_image,
    div,
    grad,
    grad_norm_sq,
    pixel_norm,
    tv_aniso_value,
    tv_iso_value,
)

__all__ = [
    "REGULARISER_NAMES", "Regulariser", "TotalVariation", "GradientTikhonov", "Tikhonov",
    "L1", "Constraint", "make_regulariser", "grad", "div", "grad_norm_sq",
]

REGULARISER_NAMES = (
    "tv", "tv-aniso", "tikhonov", "gradient-tikhonov", "l1", "nonneg", "box", "none",
)
_ALIASES = {"tv-iso": "tv", "tv-isotropic": "tv", "tv-anisotropic": "tv-aniso",
            "h1": "gradient-tikhonov", "identity": "none"}
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
    def K(self, x: Tensor) -> Tensor:  # noqa: N802 - the operator's conventional name
        """Dual-shaped K x; the zero map (shape of x) when there is no dual part."""
        return torch.zeros_like(x)

    def KT(self, p: Tensor) -> Tensor:  # noqa: N802
        """x-shaped K^T p."""
        return torch.zeros_like(p)

    def K_norm_sq(self, x_shape: tuple[int, ...]) -> float:  # noqa: N802
        """||K||^2 for images of shape x_shape (batch optional: only the last two dims count)."""
        return 0.0

    def prox_dual(self, p: Tensor, step: float | Tensor, alpha: float | Tensor) -> Tensor:
        """prox_{step h*}(p); h = 0 here, so h* = indicator of {0} and the prox is 0."""
        return torch.zeros_like(p)

    # -- the primal part alpha g(x) + constraint ------------------------------------------------
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
    return None if math.isinf(b) else b


# -- concrete regularisers ------------------------------------------------------------------------
class TotalVariation(Regulariser):
    """TV (isotropic: pixelwise Euclidean norm over the 2*C components) or anisotropic (l1)."""

    has_dual = True
    homogeneous = True

    def __init__(self, isotropic: bool = True, lo: float = -math.inf,
                 hi: float = math.inf) -> None:
        super().__init__(lo, hi)
        self.isotropic = isotropic
        self.name = "tv" if isotropic else "tv-aniso"

    def raw_value(self, x: Tensor) -> Tensor:
        return tv_iso_value(x) if self.isotropic else tv_aniso_value(x)

    def K(self, x: Tensor) -> Tensor:  # noqa: N802
        check_image(x)
        return grad(x)

    def KT(self, p: Tensor) -> Tensor:  # noqa: N802
        return -div(p)

    def K_norm_sq(self, x_shape: tuple[int, ...]) -> float:  # noqa: N802
        return grad_norm_sq(tuple(x_shape))

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


class GradientTikhonov(Regulariser):
    """R(x) = ½||grad x||^2 as h(alpha grad x) with h(u) = ||u||^2 / (2 alpha) (MATH.md §4.2)."""

    name = "gradient-tikhonov"
    has_dual = True

    def raw_value(self, x: Tensor) -> Tensor:
        check_image(x)
        return 0.5 * grad(x).square().flatten(1).sum(dim=1)

    def K(self, x: Tensor) -> Tensor:  # noqa: N802
        check_image(x)
        return grad(x)

    def KT(self, p: Tensor) -> Tensor:  # noqa: N802
        return -div(p)

    def K_norm_sq(self, x_shape: tuple[int, ...]) -> float:  # noqa: N802
        return grad_norm_sq(tuple(x_shape))

    def prox_dual(self, p: Tensor, step: float | Tensor, alpha: float | Tensor) -> Tensor:
        """h*(v) = alpha/2 ||v||^2, so prox_{step h*}(v) = v / (1 + step alpha)."""
        t = _per_sample(step, p, "step", True)
        a = _per_sample(alpha, p, "alpha", True)
        return p / (1.0 + t * a)

    def subgradient(self, x: Tensor) -> Tensor:
        return -div(grad(x))


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


# -- factory --------------------------------------------------------------------------------------
def _bound(value: Any, what: str, default: float) -> float:
    if value is None:
        return default
    try:
        b = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{what}={value!r}: must be a number (or null for unbounded).") from None
    if math.isnan(b):
        raise InputError(f"{what} is NaN: give a number (or null for unbounded).")
    return b


def _box(value: Any) -> tuple[float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise InputError(f"box={value!r}: give two bounds [lo, hi] (null for unbounded).")
    return _bound(value[0], "box lo", -math.inf), _bound(value[1], "box hi", math.inf)


def _canonical(name: Any) -> str:
    if not isinstance(name, str):
        raise InputError(f"regulariser name {name!r}: must be a string, one of "
                         f"{', '.join(REGULARISER_NAMES)}.")
    key = name.strip().lower().replace("_", "-").replace(" ", "")
    key = _ALIASES.get(key, key)
    if key not in REGULARISER_NAMES:
        raise InputError(
            f"regulariser {name!r} is unknown; valid names: {', '.join(REGULARISER_NAMES)} "
            "(append '+nonneg' or '+box' for a constraint, e.g. 'tv+nonneg')."
        )
    return key


def make_regulariser(spec: str | Mapping[str, Any] | Regulariser) -> Regulariser:
    """Build a regulariser from ``"tv"``, ``"tv+nonneg"``, ``"tv+box"`` (box [0, 1]),
    ``{"name": "box", "lo": 0, "hi": 1}``, ``{"name": "tv", "box": [0, 1]}`` or
    ``{"name": "l1", "nonneg": True}``. Bounds may be null (unbounded)."""
    if isinstance(spec, Regulariser):
        return spec
    if isinstance(spec, str):
        parts = spec.split("+")
        params: dict[str, Any] = {"name": parts[0]}
        for extra in parts[1:]:
            key = extra.strip().lower()
            if key == "nonneg":
                params["nonneg"] = True
            elif key == "box":
                params["box"] = [0.0, 1.0]
            else:
                raise InputError(f"regulariser {spec!r}: unknown constraint {extra!r}; "
                                 "use '+nonneg' or '+box' (box [0, 1]).")
    elif isinstance(spec, Mapping):
        params = dict(spec)
    else:
        raise InputError(f"regulariser spec {spec!r}: give a name such as 'tv' or a dict "
                         "like {'name': 'tv', 'box': [0, 1]}.")
    if "name" not in params:
        raise InputError(f"regulariser spec {spec!r} has no 'name'; valid names: "
                         f"{', '.join(REGULARISER_NAMES)}.")
    name = _canonical(params.pop("name"))
    allowed = {"box", "nonneg"} | ({"lo", "hi"} if name == "box" else set())
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise InputError(f"regulariser {name!r}: unknown option(s) {unknown}; "
                         f"allowed: {sorted(allowed)}.")
    lo, hi = -math.inf, math.inf
    if name == "box":
        if "lo" in params or "hi" in params:  # a missing bound is unbounded
            lo = _bound(params.get("lo"), "box lo", -math.inf)
            hi = _bound(params.get("hi"), "box hi", math.inf)
        elif "box" not in params:  # plain "box": images in [0, 1]
            lo, hi = 0.0, 1.0
    elif name == "nonneg":
        lo = 0.0
    if "box" in params:
        blo, bhi = _box(params["box"])
        lo, hi = max(lo, blo), min(hi, bhi)
    if params.get("nonneg", False):
        lo = max(lo, 0.0)
    if not lo < hi and not (lo == hi and math.isfinite(lo)):
        raise InputError(f"regulariser {name!r}: the constraint [{lo:g}, {hi:g}] is empty; "
                         "give lo <= hi.")
    if name in ("tv", "tv-aniso"):
        return TotalVariation(isotropic=name == "tv", lo=lo, hi=hi)
    if name == "gradient-tikhonov":
        return GradientTikhonov(lo, hi)
    if name == "tikhonov":
        return Tikhonov(lo, hi)
    if name == "l1":
        return L1(lo, hi)
    return Constraint(name, lo, hi)
