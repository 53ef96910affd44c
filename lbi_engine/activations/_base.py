"""The proximal-activation base class and the numerics every kind shares (MATH.md §1-§2).

Kept apart from ``activations.py`` so that the concrete kinds can import it without an
import cycle; ``lbi_engine.activations`` re-exports everything public.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import Tensor

from lbi_engine.errors import InputError, ShapeMismatchError

# Points a little outside a *closed* domain bound still count as inside (and are projected
# before evaluation): data saved in float32 or a softmax that sums to 1 - 3e-8 must not give an
# infinite loss. The slack is max(1e-6, 64 eps(dtype)) * max(1, |bound|); the simplex sum gets
# sqrt(n) times that. Open bounds (softsign's +-1, where psi is infinite) get none.
DOMAIN_ATOL_FLOOR = 1e-6
DOMAIN_ATOL_ULPS = 64

# Iteration cap of the safeguarded Newton solvers. Newton usually converges in < 10 steps;
# the cap covers the worst case of pure bisection from a bracket 2^40 times wider than the
# float64 resolution of the root.
ROOT_MAX_ITER = 100

Step = float | Tensor


def domain_atol(dtype: torch.dtype) -> float:
    """Absolute slack for closed domain bounds in ``dtype`` (see DOMAIN_ATOL_FLOOR)."""
    return max(DOMAIN_ATOL_FLOOR, DOMAIN_ATOL_ULPS * torch.finfo(dtype).eps)


def check_batched(x: Any, name: str) -> Tensor:
    """A floating tensor with a leading batch dimension, or InputError saying what to pass."""
    if not isinstance(x, Tensor):
        raise InputError(f"{name}: expected a torch tensor, got {type(x).__name__}; "
                         "convert it with torch.as_tensor(..., dtype=torch.float32).")
    if not torch.is_floating_point(x):
        raise InputError(f"{name}: expected a floating-point tensor, got dtype {x.dtype}; "
                         "convert it with .float() or .double().")
    if x.dim() == 0:
        raise InputError(f"{name}: a 0-d tensor has no batch dimension; pass shape (B, ...), "
                         "e.g. x.reshape(1, -1) for a single sample.")
    return x


def check_pair(x: Any, z: Any) -> tuple[Tensor, Tensor]:
    """x (output side) and z (pre-activation) with identical shapes."""
    x = check_batched(x, "x")
    z = check_batched(z, "z")
    if x.shape != z.shape:
        raise ShapeMismatchError(
            f"x has shape {tuple(x.shape)} but z has shape {tuple(z.shape)}; the data/auxiliary "
            "variable and the pre-activation must have the same shape (B, ...)."
        )
    return x, z


def per_sample_sum(t: Tensor) -> Tensor:
    """Sum over every non-batch dimension: (B, ...) -> (B,)."""
    return t.flatten(1).sum(dim=1) if t.dim() > 1 else t


def per_sample_all(t: Tensor) -> Tensor:
    """Logical AND over every non-batch dimension: (B, ...) -> (B,)."""
    return t.flatten(1).all(dim=1) if t.dim() > 1 else t


def softplus(z: Tensor) -> Tensor:
    """log(1 + e^z) without overflow and without torch's linear cut-off at z > 20.

    ``torch.nn.functional.softplus`` returns z for z > 20, an error of e^-20 ~ 2e-9 that would
    spoil float64 checks of B(sigma(z), z) = 0.
    """
    return z.clamp_min(0) + torch.log1p(torch.exp(-z.abs()))


def xlogx(x: Tensor) -> Tensor:
    """x log x with 0 log 0 = 0."""
    return torch.xlogy(x, x)


def check_step(t: Step, v: Tensor) -> Step:
    """Validate the prox step t > 0: a Python number or a tensor broadcastable to v.

    A 1-D tensor of length B (with v of rank > 1) is taken per sample and reshaped to
    (B, 1, ..., 1).
    """
    if isinstance(t, Tensor):
        t = t.to(device=v.device, dtype=v.dtype)
        if t.dim() == 1 and v.dim() > 1 and t.shape[0] == v.shape[0]:
            t = t.reshape(-1, *([1] * (v.dim() - 1)))
        if not bool(torch.isfinite(t).all()) or not bool((t > 0).all()):
            raise InputError("prox step t: every entry must be finite and > 0; "
                             "use activation.project(v) for the t -> 0 limit.")
        return t
    try:
        tf = float(t)
    except (TypeError, ValueError) as exc:
        raise InputError(f"prox step t: expected a number or a tensor, got {t!r}.") from exc
    if not math.isfinite(tf) or tf <= 0:
        raise InputError(f"prox step t = {tf!r} must be finite and > 0; "
                         "use activation.project(v) for the t -> 0 limit.")
    return tf


def solve_increasing(
    g_and_dg: Callable[[Tensor], tuple[Tensor, Tensor, Tensor]],
    x0: Tensor,
    lo: Tensor,
    hi: Tensor,
    max_iter: int = ROOT_MAX_ITER,
) -> Tensor:
    """Elementwise root of a strictly increasing g with g(lo) <= 0 <= g(hi) (rtsafe).

    ``g_and_dg(x)`` returns g, g' and the size of the terms g is summed from (its rounding
    scale). Newton steps that leave the current bracket are replaced by bisection, so every
    element converges. An element is finished when its step is below 4 ulps of x, or after
    one more Newton step once |g| is at round-off level (8 eps * scale): with a small slope g'
    the round-off of g moves Newton by several ulps of x, so a step test alone would oscillate
    until ``max_iter``. Vectorised: one Python iteration updates every element.
    """
    eps = torch.finfo(x0.dtype).eps
    x = x0
    done = torch.zeros_like(x0, dtype=torch.bool)
    for it in range(max_iter):
        g, dg, scale = g_and_dg(x)
        # |g| at round-off level: take this last Newton step (quadratic convergence makes
        # it exact to round-off even if |g| was a little above the noise), then freeze.
        last = g.abs() <= 8 * eps * scale
        above = g > 0
        hi = torch.where(above, x, hi)
        lo = torch.where(above, lo, x)
        newton = x - g / dg
        # A root on the bracket's edge (e.g. sigma saturated, where the a-priori bracket is
        # tight) must not make Newton land one ulp outside and fall back to bisection.
        slack = 4 * eps * (1 + newton.abs())
        inside = (newton >= lo - slack) & (newton <= hi + slack)
        x_new = torch.where(done, x, torch.where(inside, newton, 0.5 * (lo + hi)))
        done = done | last | ((x_new - x).abs() <= 4 * eps * (1 + x_new.abs()))
        x = x_new
        # Checking every other step halves the host syncs on GPUs.
        if it % 2 == 1 and bool(done.all()):
            break
    return x


class ProximalActivation(ABC):
    """sigma = prox_Psi for a proper lsc convex Psi (MATH.md §1.1), with its loss B_Psi.

    Subclasses give sigma, the elementwise terms of psi, F*_Psi and B_Psi (closed forms of
    MATH.md §2.2-2.3), and prox_{t Psi}; this class adds validation, the domain test, the
    per-sample (B,) reductions and +inf outside dom Psi. ``lower``/``upper`` bound the closure
    of dom psi per element; ``lower_open``/``upper_open`` mark bounds psi is infinite at.
    """

    name: ClassVar[str] = ""
    elementwise: ClassVar[bool] = True
    lower: float = -math.inf
    upper: float = math.inf
    lower_open: bool = False
    upper_open: bool = False

    # ----- what a kind supplies -------------------------------------------------------------
    @abstractmethod
    def sigma(self, z: Tensor) -> Tensor:
        """The activation prox_Psi(z), same shape as z (differentiable by autograd)."""

    @abstractmethod
    def _psi_terms(self, x: Tensor) -> Tensor:
        """psi elementwise for x in the closed domain (+inf allowed at open bounds)."""

    @abstractmethod
    def _conjugate_terms(self, z: Tensor) -> Tensor:
        """Terms whose per-sample sum is F*_Psi(z) (table of MATH.md §2.2)."""

    @abstractmethod
    def _bregman_terms(self, x: Tensor, z: Tensor) -> Tensor:
        """Terms whose per-sample sum is B_Psi(x, z) for x in the closed domain (MATH §2.3)."""

    @abstractmethod
    def _prox(self, v: Tensor, t: Step) -> Tensor:
        """prox_{t Psi}(v) for a validated step t (MATH.md §2.4)."""

    def _params(self) -> dict[str, Any]:
        """Constructor parameters, as make_activation takes them (none by default)."""
        return {}

    # ----- public interface (docs/developer/contracts.md) -----------------------------------
    def psi(self, x: Tensor) -> Tensor:
        """(B,) sum of psi over the elements of each sample; +inf where x is not in dom Psi."""
        x = check_batched(x, "x")
        ok = self.in_domain(x, atol=self._atol(x.dtype))
        vals = per_sample_sum(self._psi_terms(self.project(x)))
        return torch.where(ok, vals, torch.full_like(vals, math.inf))

    def conjugate(self, z: Tensor) -> Tensor:
        """(B,) F*_Psi(z) = sup_y <z, y> - ||y||^2/2 - Psi(y), by its closed form."""
        return per_sample_sum(self._conjugate_terms(check_batched(z, "z")))

    def bregman(self, x: Tensor, z: Tensor) -> Tensor:
        """(B,) lifted Bregman loss B_Psi(x, z) >= 0; +inf for samples with x outside dom Psi.

        Evaluated in a cancellation-free closed form; the per-sample value is clamped at 0
        to remove round-off negatives (the exact value is >= 0, MATH.md §1.2 fact 3).
        """
        x, z = check_pair(x, z)
        ok = self.in_domain(x, atol=self._atol(x.dtype))
        vals = per_sample_sum(self._bregman_terms(self.project(x), z)).clamp_min(0)
        return torch.where(ok, vals, torch.full_like(vals, math.inf))

    def bregman_in_domain(self, x: Tensor, z: Tensor) -> Tensor:
        """:meth:`bregman` for an ``x`` known to lie in the closed domain with the shape of
        ``z`` (a solver's own projected iterates): the same closed form without the checks
        and the projection, which cost more than the formula on small layers."""
        return per_sample_sum(self._bregman_terms(x, z)).clamp_min(0)

    def bregman_grad_z(self, x: Tensor, z: Tensor) -> Tensor:
        """grad_z B_Psi(x, z) = sigma(z) - x (no derivative of sigma needed)."""
        x, z = check_pair(x, z)
        return self.sigma(z) - x

    def prox(self, v: Tensor, t: Step) -> Tensor:
        """prox_{t Psi}(v) = argmin_u ||u - v||^2/2 + t Psi(u), for t > 0 (float or tensor)."""
        v = check_batched(v, "v")
        return self._prox(v, check_step(t, v))

    def project(self, x: Tensor) -> Tensor:
        """Euclidean projection onto dom Psi (closed bounds; open ones pulled in by 1 ulp)."""
        lo = None if math.isinf(self.lower) else self.lower
        hi = None if math.isinf(self.upper) else self.upper
        if lo is None and hi is None:
            return x
        eps = torch.finfo(x.dtype).eps
        if lo is not None and self.lower_open:
            lo = lo + eps * max(1.0, abs(lo))
        if hi is not None and self.upper_open:
            hi = hi - eps * max(1.0, abs(hi))
        return x.clamp(min=lo, max=hi)

    def in_domain(self, x: Tensor, atol: float = 0.0) -> Tensor:
        """(B,) bool: every element finite and within [lower - tol_lo, upper + tol_hi].

        The slack of a bound b is atol * max(1, |b|); it widens closed bounds only, an open
        bound (psi = +inf there) is strict.
        """
        x = check_batched(x, "x")
        ok = torch.isfinite(x)
        lo, hi = self.lower, self.upper
        if not math.isinf(lo):
            ok &= (x > lo) if self.lower_open else (x >= lo - atol * max(1.0, abs(lo)))
        if not math.isinf(hi):
            ok &= (x < hi) if self.upper_open else (x <= hi + atol * max(1.0, abs(hi)))
        return per_sample_all(ok)

    def spec(self) -> dict[str, Any]:
        """{"name": ..., **params}; ``make_activation(a.spec()) == a``."""
        return {"name": self.name, **self._params()}

    # ----- helpers --------------------------------------------------------------------------
    def _atol(self, dtype: torch.dtype) -> float:
        """Domain slack used by psi and bregman (in_domain scales it by each bound's size)."""
        return domain_atol(dtype)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.spec() == self.spec()

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(self._params().items()))))

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({params})"


class RootProxActivation(ProximalActivation):
    """Elementwise kind whose prox_{t psi} uses the generic root formula of MATH.md §2.4.

    Solves g(zeta) = t zeta + (1 - t) sigma(zeta) - v = 0 with safeguarded Newton
    (g' = t + (1 - t) sigma' lies in [min(t, 1), max(t, 1)]) in the bracket
    v -+ |g(v)| / min(t, 1), then returns sigma(zeta).
    """

    @abstractmethod
    def _dsigma(self, z: Tensor) -> Tensor:
        """sigma'(z) in [0, 1] (used only as the Newton slope)."""

    def _prox(self, v: Tensor, t: Step) -> Tensor:
        if isinstance(t, float) and t == 1.0:
            return self.sigma(v)
        m = min(t, 1.0) if isinstance(t, float) else t.clamp(max=1.0)

        def g_and_dg(zeta: Tensor) -> tuple[Tensor, Tensor, Tensor]:
            tz, rest = t * zeta, (1 - t) * self.sigma(zeta)
            return tz + rest - v, t + (1 - t) * self._dsigma(zeta), tz.abs() + rest.abs() + v.abs()

        with torch.no_grad():
            radius = ((1 - t) * (self.sigma(v) - v)).abs() / m
            zeta = solve_increasing(g_and_dg, v, v - radius, v + radius)
        return self.sigma(zeta)
