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
    gaussian           no h            | g = ½(x - mu)^T Sigma^{-1} (x - mu), learned (_gaussian.py)
    gaussian+tv        h = ||.||_{2,1}, K = gamma grad | g = the Gaussian's (R = G + gamma TV)

Any regulariser can carry an interval constraint lo <= x <= hi ("tv+nonneg",
``{"name": "tv", "box": [0, 1]}``), applied inside ``prox_primal``. Regularisers without a
dual part have K = 0 (same shape as x), h = 0 and prox_{h*} = 0, so a solver that ignores
``has_dual`` still computes the right thing.

Images are ``(B, H, W)`` or ``(B, C, H, W)``; the gradient acts on the last two dims and has
shape ``(B, 2, *image_shape)`` (see ``lbi_engine.operators.finite_differences``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from lbi_engine.errors import InputError
from lbi_engine.operators.finite_differences import div, grad, grad_norm_sq
from lbi_engine.regularisers._base import CONSTRAINT_TOL, Regulariser
from lbi_engine.regularisers._gaussian import DEFAULT_TV_WEIGHT, GaussianPrior, LowRankGaussian
from lbi_engine.regularisers._gradient import GradientTikhonov, TotalVariation
from lbi_engine.regularisers._pointwise import L1, Constraint, Tikhonov
from lbi_engine.regularisers._tv_prox import TVProx, dual_ball_projection

# The kinds live in rooms (_base, _gradient, _pointwise);
# this module is the public home of all of them and of the factory, so importers never change.
__all__ = [
    "REGULARISER_NAMES", "Regulariser", "TotalVariation", "GradientTikhonov", "Tikhonov",
    "L1", "Constraint", "make_regulariser", "grad", "div", "grad_norm_sq", "CONSTRAINT_TOL",
    "LEARNED_REGULARISER_NAMES", "GaussianPrior", "LowRankGaussian", "parse_spec",
    "regulariser_name", "TVProx", "dual_ball_projection", "COMBINED_REGULARISER_NAMES",
    "DEFAULT_TV_WEIGHT",
]

REGULARISER_NAMES = (
    "tv", "tv-aniso", "tikhonov", "gradient-tikhonov", "l1", "nonneg", "box", "none",
)
#: Regularisers fitted on data: the name alone does not build one (it needs the fitted prior,
#: which the caller loads: lbi_engine.priors.input), so they are listed apart.
LEARNED_REGULARISER_NAMES = ("gaussian",)
#: Specs that add a term to a learned regulariser ('+tv': gamma DEFAULT_TV_WEIGHT, '+tv=G':
#: gamma G), offered beside the names (each may take '+nonneg' or '+box' too).
COMBINED_REGULARISER_NAMES = ("gaussian+tv",)
_ALIASES = {"gauss": "gaussian", "gaussian-prior": "gaussian",
            "tv-iso": "tv", "tv-isotropic": "tv", "tv-anisotropic": "tv-aniso",
            "h1": "gradient-tikhonov", "identity": "none"}


# -- factory --------------------------------------------------------------------------------------
def _bound(value: Any, what: str, default: float) -> float:
    """One bound from JSON/CLI: null means unbounded (``default``); NaN would disable checks."""
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
    """``[lo, hi]`` from a spec's ``box`` entry (either side may be null)."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise InputError(f"box={value!r}: give two bounds [lo, hi] (null for unbounded).")
    return _bound(value[0], "box lo", -math.inf), _bound(value[1], "box hi", math.inf)


def _canonical(name: Any) -> str:
    """The registry name for what users type (case, '_' vs '-', spaces and aliases vary)."""
    if not isinstance(name, str):
        raise InputError(f"regulariser name {name!r}: must be a string, one of "
                         f"{', '.join(REGULARISER_NAMES)}.")
    key = name.strip().lower().replace("_", "-").replace(" ", "")
    key = _ALIASES.get(key, key)
    if key not in REGULARISER_NAMES + LEARNED_REGULARISER_NAMES:
        raise InputError(
            f"regulariser {name!r} is unknown; valid names: "
            f"{', '.join(REGULARISER_NAMES + LEARNED_REGULARISER_NAMES)} "
            "(append '+nonneg' or '+box' for a constraint, e.g. 'tv+nonneg')."
        )
    return key


def parse_spec(spec: str | Mapping[str, Any]) -> dict[str, Any]:
    """The parameters of ``"tv+box"``-style text or a spec dict, name included (unchecked)."""
    if isinstance(spec, str):
        parts = spec.split("+")
        params: dict[str, Any] = {"name": parts[0]}
        for extra in parts[1:]:
            key = extra.strip().lower()
            if key == "nonneg":
                params["nonneg"] = True
            elif key == "box":
                params["box"] = [0.0, 1.0]
            elif key == "tv" or key.startswith("tv="):
                params["tv"] = DEFAULT_TV_WEIGHT if key == "tv" else key[3:]
            else:
                raise InputError(f"regulariser {spec!r}: unknown constraint {extra!r}; "
                                 "use '+nonneg' or '+box' (box [0, 1]), or '+tv' / '+tv=G' "
                                 "after 'gaussian'.")
    elif isinstance(spec, Mapping):
        params = dict(spec)
    else:
        raise InputError(f"regulariser spec {spec!r}: give a name such as 'tv' or a dict "
                         "like {'name': 'tv', 'box': [0, 1]}.")
    if "name" not in params:
        raise InputError(f"regulariser spec {spec!r} has no 'name'; valid names: "
                         f"{', '.join(REGULARISER_NAMES)}.")
    return params


def regulariser_name(spec: str | Mapping[str, Any] | Regulariser) -> str:
    """The registry name of a spec (``"Gaussian+box"`` -> ``"gaussian"``)."""
    if isinstance(spec, Regulariser):
        return spec.name
    return _canonical(parse_spec(spec)["name"])


def make_regulariser(spec: str | Mapping[str, Any] | Regulariser) -> Regulariser:
    """Build a regulariser from ``"tv"``, ``"tv+nonneg"``, ``"tv+box"`` (box [0, 1]),
    ``{"name": "box", "lo": 0, "hi": 1}``, ``{"name": "tv", "box": [0, 1]}`` or
    ``{"name": "l1", "nonneg": True}``. Bounds may be null (unbounded)."""
    if isinstance(spec, Regulariser):
        return spec
    params = parse_spec(spec)
    name = _canonical(params.pop("name"))
    allowed = {"box", "nonneg"} | ({"lo", "hi"} if name == "box" else set()) \
        | ({"prior", "tv"} if name == "gaussian" else set())
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
    if name == "gaussian":
        return _gaussian(params.get("prior"), lo, hi, _tv_weight(params.get("tv", 0.0)))
    if name in ("tv", "tv-aniso"):
        return TotalVariation(isotropic=name == "tv", lo=lo, hi=hi)
    if name == "gradient-tikhonov":
        return GradientTikhonov(lo, hi)
    if name == "tikhonov":
        return Tikhonov(lo, hi)
    if name == "l1":
        return L1(lo, hi)
    return Constraint(name, lo, hi)


def _tv_weight(value: Any) -> float:
    """gamma of 'gaussian+tv=G' or a spec's "tv" entry: a finite number >= 0."""
    try:
        gamma = float(value)
    except (TypeError, ValueError):
        raise InputError(f"tv={value!r}: the TV weight of 'gaussian+tv' must be a number "
                         f"(e.g. gaussian+tv={DEFAULT_TV_WEIGHT:g}).") from None
    if not (math.isfinite(gamma) and gamma >= 0):
        raise InputError(f"tv={value!r}: the TV weight of 'gaussian+tv' must be a finite "
                         f"number >= 0 (e.g. gaussian+tv={DEFAULT_TV_WEIGHT:g}).")
    return gamma


def _gaussian(prior: Any, lo: float, hi: float, tv: float = 0.0) -> Regulariser:
    """The learned input prior: ``prior`` is the fitted LowRankGaussian (a spec read from JSON
    names its file's sha256 only, which cannot rebuild it)."""
    if not isinstance(prior, LowRankGaussian):
        raise InputError(
            "regulariser 'gaussian' needs a fitted input prior: zoo networks ship one "
            "(lbi invert NETWORK --regulariser gaussian+box), else fit one with `lbi prior "
            "NETWORK --samples FILE` and pass --input-prior BASE (Python: "
            "lbi_engine.priors.input.gaussian_regulariser).")
    return GaussianPrior(prior, lo, hi, tv=tv)
