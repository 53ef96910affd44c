"""A learned Gaussian prior on the input: R(x) = ½ (x - mu)^T Sigma^{-1} (x - mu) (MATH.md §4.3).

A room of ``lbi_engine.regularisers`` (import from there). mu and Sigma are fitted on clean
samples (``lbi prior``, ``lbi_engine.priors.input``); Sigma is stored as low rank plus diagonal,
Sigma = U U^T + diag(d) with U (n, k), d > 0, so every product with Sigma^{-1} or with
(Sigma + t I)^{-1} costs O(n k) by Woodbury:

    (E + U U^T)^{-1} v = E^{-1} v - E^{-1} U (I + U^T E^{-1} U)^{-1} U^T E^{-1} v,  E diagonal.

R is convex, proper, continuous (a positive definite quadratic), so the paper's theory holds.
It lives in g of the split alpha R = h(alpha K x) + alpha g(x) (no dual part) and its prox is

    prox_{t R}(x) = argmin_u ½||u - x||^2 + t/2 (u - mu)^T Sigma^{-1} (u - mu)
                  = mu + (I + t Sigma^{-1})^{-1} (x - mu) = x - t (Sigma + t I)^{-1} (x - mu),

a Woodbury solve with E = diag(d) + t I. With a box lo <= u <= hi the prox is a strongly convex
quadratic over a box, not separable, so clipping the unconstrained prox is not the prox: it is
solved by accelerated projected gradient in the diagonal metric M = I + t diag(d)^{-1}, which
majorises the Hessian I + t Sigma^{-1} (Sigma^{-1} <= diag(d)^{-1} since U U^T >= 0), so a step
of M^{-1} is a descent step and the M-projection onto a box is the clip; started at the clipped
unconstrained prox, with the gradient restart of O'Donoghue–Candès.

With a TV term (``tv`` = gamma > 0, "gaussian+tv") R(x) = G(x) + gamma TV(x), G the quadratic
above: still convex, proper, continuous. The split puts gamma TV in h (K = gamma grad, the
dual prox the unit-ball projection of isotropic TV) and G + box in g, so Condat–Vũ needs
nothing new. The whole prox of t R (+ box), :meth:`GaussianPrior.prox`, is TV's FGP with the
primal map u(p) = prox_{t G + box}(v + t gamma div p) (``_tv_prox``: 1/2 ||u - v||^2 + t G
+ box is 1-strongly convex, so the FGP step and its duality gap are TV's; MATH.md §4.3).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import torch
from torch import Tensor

from lbi_engine.errors import InputError
from lbi_engine.operators.finite_differences import tv_iso_value
from lbi_engine.operators.momentum import Momentum
from lbi_engine.regularisers._base import Regulariser, _per_sample
from lbi_engine.regularisers._gradient import TotalVariation
from lbi_engine.regularisers._tv_prox import TVProx

__all__ = ["GaussianPrior", "LowRankGaussian", "DEFAULT_TV_WEIGHT"]

#: gamma of "gaussian+tv" when the spec gives none: TV's weight relative to the Gaussian's
#: (alpha multiplies both), chosen on MNIST training digits (MATH.md §4.3).
DEFAULT_TV_WEIGHT = 1.0

#: The weight for code noise of per-entry std s: alpha = c(s) s^2 with c = NOISE_FACTOR_HIGH
#: for s >= NOISE_KNEE, rising log-linearly in s to NOISE_FACTOR_LOW at NOISE_LOW and kept
#: there below (MATH.md §4.3: Bayes' weight is s^2; the lifted objective and a Gaussian model
#: of digits want less, measured on validation digits by benchmarks/studies/bench_input_prior.py
#: --calibrate, disjoint from the digits it reports on).
NOISE_FACTOR_HIGH = 1.0 / 8.0
NOISE_FACTOR_LOW = 1.0 / 2.0
NOISE_KNEE = 0.05
NOISE_LOW = 0.01
#: How many (device, dtype, t) Woodbury factorisations a prior keeps: a run uses one step,
#: the alpha search a few alphas.
_CACHE_SIZE = 8


#: Most floating-point operations one Woodbury factorisation may take (k^3 / 3 for the
#: Cholesky factor of the k x k core, n k^2 for the core and the triangular solve): about ten
#: seconds on one core. A prior of rank 96 on a 3 x 32 x 32 input takes 3e7.
MAX_FACTOR_FLOPS = 2 * 10**10


def check_factorisation(n: int, k: int, what: str) -> None:
    """Refuse a prior N(mean, U U^T + diag) on n values with a rank-k factor whose
    factorisation would not fit: rank above the dimension (meaningless, and k x k work for
    nothing), more float64 memory than the limit (U, E^{-1} U and G of n x k, the core and
    its Cholesky factor of k x k), or more than MAX_FACTOR_FLOPS of dense work."""
    from lbi_engine.limits import check_bytes

    if k > n:
        raise InputError(f"{what} has rank {k:,} above its dimension {n:,}; a covariance of "
                         f"{n:,} values has rank at most {n:,}: fit the prior again with a "
                         "smaller rank")
    check_bytes(8 * (3 * n * k + 2 * k * k), f"{what} (rank {k:,} on {n:,} values: its "
                "Woodbury factorisation in float64)", "fit the prior again with a smaller rank")
    flops = k**3 // 3 + n * k * k
    if flops > MAX_FACTOR_FLOPS:
        raise InputError(f"{what} (rank {k:,} on {n:,} values) needs about {flops:.1e} "
                         f"operations to factorise, more than lbi's bound of "
                         f"{MAX_FACTOR_FLOPS:.0e} (minutes of work); fit it again with a "
                         "rank of a few hundred")


class LowRankGaussian:
    """N(mean, U U^T + diag(diag)) on one flattened vector of length n (tensors on the CPU;
    copies on a run's device and dtype are made once and cached)."""

    def __init__(self, mean: Tensor, factor: Tensor, diag: Tensor, label: str = "") -> None:
        """``label``: what names this prior in records (its file's sha256)."""
        n = int(mean.numel())
        if mean.ndim != 1 or factor.ndim != 2 or factor.shape[0] != n or diag.shape != mean.shape:
            raise InputError(f"a Gaussian prior needs mean (n,), factor (n, k), diag (n,); got "
                             f"{tuple(mean.shape)}, {tuple(factor.shape)}, {tuple(diag.shape)}.")
        if not bool((diag > 0).all()):
            raise InputError("a Gaussian prior's diagonal must be positive (a covariance floor).")
        check_factorisation(n, int(factor.shape[1]), f"the Gaussian prior {label}".rstrip())
        self.mean, self.factor, self.diag = mean, factor, diag
        self.label = label
        self._cache: OrderedDict[tuple, tuple[Tensor, ...]] = OrderedDict()

    @property
    def size(self) -> int:
        return int(self.mean.numel())

    @property
    def rank(self) -> int:
        return int(self.factor.shape[1])

    def _remember(self, key: tuple, make: Any) -> tuple[Tensor, ...]:
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        value = make()
        self._cache[key] = value
        while len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return value

    def _shifted(self, like: Tensor, shift: tuple[float, ...]) -> tuple[Tensor, ...]:
        """(E^{-1}, G) for E = diag(d) + shift I, one per entry of ``shift`` (batched), on
        like's device and dtype, with G = E^{-1} U L^{-T}, L L^T = I + U^T E^{-1} U, so that
        (E + U U^T)^{-1} v = E^{-1} v - G G^T v: two products with an n x k matrix per
        application, no triangular solve. Formed in float64 (the core may be
        ill-conditioned), then converted."""

        def make() -> tuple[Tensor, ...]:
            u = self.factor.to(torch.float64)
            shifts = torch.tensor(shift, dtype=torch.float64)[:, None]
            einv = 1.0 / (self.diag.to(torch.float64)[None, :] + shifts)  # (S, n)
            einv_u = einv[:, :, None] * u[None]  # (S, n, k)
            core = torch.eye(u.shape[1], dtype=torch.float64) \
                + torch.einsum("nk,snl->skl", u, einv_u)
            chol = torch.linalg.cholesky(core)
            # G^T = L^{-1} (E^{-1} U)^T
            g = torch.linalg.solve_triangular(chol, einv_u.transpose(1, 2), upper=False)
            g = g.transpose(1, 2).contiguous()  # (S, n, k)
            return tuple(t.to(device=like.device, dtype=like.dtype) for t in (einv, g))

        return self._remember((like.device, like.dtype, shift), make)

    def mean_on(self, like: Tensor) -> Tensor:
        """mu (n,) on like's device and dtype."""
        return self._remember((like.device, like.dtype, "mean"),
                              lambda: (self.mean.to(device=like.device, dtype=like.dtype),))[0]

    def _solve(self, v: Tensor, shift: tuple[float, ...]) -> Tensor:
        """(Sigma + s I)^{-1} v for v (B, n); ``shift`` holds s, one entry (all samples) or B."""
        einv, g = self._shifted(v, shift)
        if len(shift) == 1:
            return v * einv[0] - (v @ g[0]) @ g[0].T
        w = torch.einsum("bn,bnk->bk", v, g)
        return v * einv - torch.einsum("bnk,bk->bn", g, w)

    def precision_apply(self, v: Tensor) -> Tensor:
        """Sigma^{-1} v for v (B, n) (Woodbury)."""
        return self._solve(v, (0.0,))

    def shifted_solve(self, v: Tensor, shift: float | Tensor) -> Tensor:
        """(Sigma + shift I)^{-1} v for v (B, n); ``shift`` a number or one per sample."""
        if isinstance(shift, Tensor) and shift.numel() > 1:
            values = tuple(float(s) for s in shift.reshape(-1))
            if len(set(values)) > 1:
                return self._solve(v, values)
            shift = values[0]
        return self._solve(v, (float(shift),))

    def gradient(self, h: Tensor) -> Tensor:
        """grad R = Sigma^{-1} (h - mu) for h (B, *shape); same shape."""
        flat = h.reshape(h.shape[0], -1) - self.mean_on(h)
        return self.precision_apply(flat).reshape(h.shape)

    def value(self, h: Tensor) -> Tensor:
        """R(h) = ½ (h - mu)^T Sigma^{-1} (h - mu) per sample, (B,).

        Summed in float64 for float32 input: the objective of a converged run is small next
        to its terms, and float32 rounding of this sum (~1e-4 relative on a 3x32x32 image)
        exceeded the stop rule's tolerance, so such a run could only end at max_iter."""
        wide = h.reshape(h.shape[0], -1)
        if wide.is_floating_point() and wide.element_size() < 8:
            wide = wide.double()
        flat = wide - self.mean_on(wide)
        return (0.5 * (flat * self.precision_apply(flat)).sum(dim=1)).to(h.dtype)

    def precision_norm(self) -> float:
        """A bound on ||Sigma^{-1}||_2 = 1 / lambda_min(Sigma) <= 1 / min(d) (U U^T is psd)."""
        return float(1.0 / self.diag.min())

    def mean_like(self, h: Tensor) -> Tensor:
        return self.mean_on(h).reshape(1, *h.shape[1:]).expand_as(h).clone()

    def inverse_diag_on(self, like: Tensor) -> Tensor:
        """diag(d)^{-1} (n,) on like's device and dtype (the box prox's metric)."""
        return self._remember((like.device, like.dtype, "dinv"),
                              lambda: ((1.0 / self.diag.to(torch.float64))
                                       .to(device=like.device, dtype=like.dtype),))[0]


class GaussianPrior(Regulariser):
    """R(x) = ½ (x - mu)^T Sigma^{-1} (x - mu) + tv TV(x) with an optional box; ``prior`` the
    fitted :class:`LowRankGaussian` on the flattened image (spec() names it by its label, the
    prior file's sha256), ``tv`` >= 0 the weight of isotropic TV (0: none; module docstring),
    ``inner_tol``/``inner_max`` the box prox's accuracy and budget."""

    name = "gaussian"
    #: how result.json names the weight of alpha_for_noise: c(s) s^2 (NOISE_FACTOR_HIGH)
    noise_alpha_rule = "noise-scaled"

    def __init__(self, prior: LowRankGaussian, lo: float = -math.inf, hi: float = math.inf,
                 inner_tol: float | None = None, inner_max: int = 2000,
                 tv: float = 0.0) -> None:
        super().__init__(lo, hi)
        if not (math.isfinite(tv) and tv >= 0):
            raise InputError(f"the TV weight of the Gaussian prior is {tv}; give a finite "
                             "number >= 0 (0: no TV).")
        self.tv = float(tv)
        # TV's own operators, dual prox and subgradient (its box stays here, in g)
        self._tv = TotalVariation(isotropic=True)
        self.has_dual = self.tv > 0
        self.prior = prior
        self.label = prior.label
        self.inner_tol = inner_tol
        self.inner_max = int(inner_max)
        self.inner_steps = 0  # box prox steps taken, summed over calls and samples

    def alpha_for_noise(self, std: float) -> float:
        """The calibrated weight c(s) s^2 for code noise of per-entry std ``std`` (see
        NOISE_FACTOR_HIGH); ``alpha "auto"`` takes it when the noise level is known."""
        s = float(std)
        if s >= NOISE_KNEE:
            factor = NOISE_FACTOR_HIGH
        elif s <= NOISE_LOW:
            factor = NOISE_FACTOR_LOW
        else:
            where = math.log(s / NOISE_LOW) / math.log(NOISE_KNEE / NOISE_LOW)
            factor = NOISE_FACTOR_LOW * (NOISE_FACTOR_HIGH / NOISE_FACTOR_LOW) ** where
        return factor * s * s

    def _check(self, x: Tensor) -> None:
        if x[0].numel() != self.prior.size:
            raise InputError(f"the Gaussian input prior has {self.prior.size} values per sample "
                             f"but the input has {x[0].numel()} ({tuple(x.shape[1:])}); fit a "
                             "prior for this network's input (lbi prior NETWORK).")

    def raw_value(self, x: Tensor) -> Tensor:
        self._check(x)
        value = self.prior.value(x)
        if self.tv > 0:
            value = value + self.tv * tv_iso_value(x)
        return value

    def subgradient(self, x: Tensor) -> Tensor:
        self._check(x)
        grad = self.prior.gradient(x)
        if self.tv > 0:
            grad = grad + self.tv * self._tv.subgradient(x)
        return grad

    # -- the TV part: h(alpha K x) with K = tv grad, h the l_{2,1} norm --------------------------
    def K(self, x: Tensor) -> Tensor:  # the operator's conventional name
        if self.tv == 0:
            return super().K(x)
        return self._tv.K(x).mul_(self.tv)

    def KT(self, p: Tensor) -> Tensor:
        if self.tv == 0:
            return super().KT(p)
        return self._tv.KT(p).mul_(self.tv)

    def K_norm_sq(self, x_shape: tuple[int, ...]) -> float:
        if self.tv == 0:
            return 0.0
        return self.tv * self.tv * self._tv.K_norm_sq(x_shape)

    def prox_dual(self, p: Tensor, step: float | Tensor, alpha: float | Tensor) -> Tensor:
        if self.tv == 0:
            return super().prox_dual(p, step, alpha)
        return self._tv.prox_dual(p, step, alpha)

    def prox(self, x: Tensor, lam: float, gap_tol: float | None = None,
             inner_max: int = 100_000) -> Tensor:
        """prox_{lam R + iota_[lo,hi]}(x), TV part included, for images x (B, *image_shape):
        FGP on TV's dual with the primal map prox_{lam G + box} (module docstring), from the
        dual 0 until the duality gap is <= ``gap_tol`` lam tv TV(u) (default: 1e-13 in
        float64, 1e-6 in float32). For tests and scripts; the solvers use the split."""
        self._check(x)
        if self.tv == 0 or lam == 0:
            return self.prox_primal(x, 1.0, lam)
        v = x.detach().clone()

        def primal(u: Tensor) -> None:  # u = lam tv div p on entry
            u.copy_(self.prox_primal(u.add_(v), 1.0, lam))

        fgp = TVProx(True, -math.inf, math.inf, int(x.shape[0]), tuple(x.shape[1:]), x.dtype,
                     x.device, compiled=False, theta=0.0, inner_max=inner_max, primal=primal)
        fgp.floor = gap_tol if gap_tol is not None else \
            (1e-13 if x.dtype == torch.float64 else 1e-6)
        fgp.v.copy_(v)
        fgp.y.copy_(v)
        fgp(float(lam) * self.tv)
        return fgp.u.clone()

    def _prox_g(self, x: Tensor, t: float | Tensor) -> Tensor:
        """The unconstrained prox x - t (Sigma + t I)^{-1} (x - mu)."""
        flat = x.reshape(x.shape[0], -1)
        shift = t.reshape(-1) if isinstance(t, Tensor) else float(t)
        if not isinstance(shift, Tensor) and shift == 0.0:
            return x
        v = flat - self.prior.mean_on(x)
        tt = shift.reshape(-1, 1) if isinstance(shift, Tensor) else shift
        return (flat - tt * self.prior.shifted_solve(v, shift)).reshape(x.shape)

    def prox_primal(self, x: Tensor, step: float | Tensor, alpha: float | Tensor) -> Tensor:
        """prox_{step alpha R + iota_[lo,hi]}(x): the Woodbury solve, and with a box the
        preconditioned projected FISTA of the module docstring from the clipped solve."""
        self._check(x)
        t = _per_sample(step, x, "step", True)
        a = _per_sample(alpha, x, "alpha", False)
        ta = t * a
        free = self._prox_g(x, ta)
        if not self.constrained:
            return free
        return self._box_prox(x, ta, self._clip(free))

    def _box_prox(self, x: Tensor, t: float | Tensor, start: Tensor) -> Tensor:
        batch = x.shape[0]
        flat_x = x.reshape(batch, -1)
        mean = self.prior.mean_on(x)
        tt = t.reshape(-1, 1) if isinstance(t, Tensor) else t
        metric = 1.0 + tt * self.prior.inverse_diag_on(x)  # (B or 1, n), majorises the Hessian
        tol = self.inner_tol if self.inner_tol is not None else \
            (1e-11 if x.dtype == torch.float64 else 1e-6)
        u = start.reshape(batch, -1).clone()
        y = u.clone()
        momentum = Momentum(batch, x)
        scale = flat_x.abs().amax(dim=1).clamp_min(1.0)
        for k in range(self.inner_max):
            grad = (y - flat_x) + tt * self.prior.precision_apply(y - mean)
            u_new = self._clip(y - grad / metric)
            step = u_new - u
            change = step.abs().amax(dim=1)
            # restart where the step points uphill: <y - u+, u+ - u> > 0
            uphill = ((y - u_new) * step).sum(dim=1) > 0
            coef = momentum.advance(uphill).reshape(-1, 1)
            y = u_new + coef * step
            u = u_new
            if bool((change <= tol * scale).all()):
                self.inner_steps += (k + 1) * batch
                break
        else:
            self.inner_steps += self.inner_max * batch
        return u.reshape(x.shape)

    def _params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"prior": self.label} if self.label else {}
        if self.tv > 0:
            out["tv"] = self.tv
        return out

    def describe(self) -> str:
        text = super().describe()
        if self.tv > 0:
            text = text.replace("gaussian", f"gaussian + {self.tv:g} tv", 1)
        return text + (f" ({self.label[:12]})" if self.label else "")
