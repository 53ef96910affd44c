"""The learned Gaussian prior plus TV (R = G + gamma TV, "gaussian+tv"): its prox against cvxpy
(Clarabel) in float64, grey and colour, with and without the box; the prox's optimality and
firm non-expansiveness; float32; the split h(alpha K x) + alpha g(x) the solvers use; the
spec grammar and its one-line refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lbi_engine.errors import InputError
from lbi_engine.operators.finite_differences import tv_iso_value
from lbi_engine.regularisers import (
    DEFAULT_TV_WEIGHT,
    GaussianPrior,
    LowRankGaussian,
    make_regulariser,
    parse_spec,
)
from tests.engine._solver_cases import cvx_tv
from tests.engine.regularisers.test_gaussian_prior import _dense, _prior

GAMMA = 0.6


def _image(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """Blocks plus noise reaching outside [0, 1] (the box is active), float64, batch 1."""
    g = torch.Generator().manual_seed(seed)
    x = torch.full((1, *shape), -0.8, dtype=torch.float64)
    x[..., : shape[-2] // 2, :] = 2.0
    return x + 0.3 * torch.randn(x.shape, generator=g, dtype=torch.float64)


def _cvx_prox(reg: GaussianPrior, v: torch.Tensor, lam: float) -> tuple[np.ndarray, float]:
    """argmin_{lo <= u <= hi} 1/2 ||u - v||^2 + lam (G(u) + gamma TV(u)), TV vectorial over
    the channels, written from the dense covariance (nothing of the prior's Woodbury)."""
    cp = pytest.importorskip("cvxpy")
    shape = tuple(v.shape[1:])
    channels, h, w = (1, *shape) if len(shape) == 2 else shape
    mu, prec = _dense(reg.prior)
    chol = np.linalg.cholesky(prec)
    u = cp.Variable(channels * h * w)
    tv = cvx_tv(u, h, w, True, channels)
    gauss = 0.5 * cp.sum_squares(chol.T @ (u - mu))
    constraints = ([u >= reg.lo] if reg.lo > -math.inf else []) + \
        ([u <= reg.hi] if reg.hi < math.inf else [])
    task = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(u - v.reshape(-1).numpy())
                                  + lam * gauss + lam * reg.tv * tv), constraints)
    # tolerances far below the defaults (whose points agree to ~1e-5 only); at these Clarabel
    # sometimes calls its (converged) answer "optimal_inaccurate": it then still agreed with
    # the looser solves and with the prox to ~1e-8
    task.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12,
               max_iter=500)
    assert task.status in ("optimal", "optimal_inaccurate")
    return np.asarray(u.value).reshape(v.shape), float(task.value)


def _objective(reg: GaussianPrior, u: torch.Tensor, v: torch.Tensor, lam: float) -> float:
    return float(0.5 * (u - v).square().sum() + lam * reg.value(u)[0])


@pytest.mark.parametrize("box", [False, True])
@pytest.mark.parametrize("shape", [(6, 6), (3, 5, 5)])
def test_prox_is_the_cvxpy_prox(shape: tuple[int, ...], box: bool) -> None:
    n = math.prod(shape)
    prior = _prior(n=n, k=4, seed=n, floor=0.02)
    reg = GaussianPrior(prior, *((0.0, 1.0) if box else (-math.inf, math.inf)), tv=GAMMA)
    v, lam = _image(shape, seed=len(shape)), 0.15
    want, value = _cvx_prox(reg, v, lam)
    u = reg.prox(v, lam)
    assert bool(reg.feasible(u).all())  # exactly in the box: value() is finite
    got = _objective(reg, u, v, lam)
    assert got <= value + 1e-9 * abs(value)  # as good as the reference optimum
    assert float(np.linalg.norm(u.numpy() - want)) <= 1e-6 * float(np.linalg.norm(want))
    # both terms matter here: dropping TV, or clipping the unconstrained prox, is worse
    plain = GaussianPrior(prior, reg.lo, reg.hi).prox_primal(v, 1.0, lam)
    assert _objective(reg, plain, v, lam) > value + 1e-4 * abs(value)
    if box:
        free = GaussianPrior(prior, tv=GAMMA).prox(v, lam)
        assert _objective(reg, reg._clip(free), v, lam) > value + 1e-4 * abs(value)


def test_prox_meets_its_optimality_condition_and_is_firmly_nonexpansive() -> None:
    """Without the box: v - u - lam grad G(u) = lam gamma (-div p) for a dual field p in the
    unit ball that certifies TV(u) = <grad u, p> (here p from the prox's own FGP is replaced
    by the check that (v - u)/lam - grad G(u) is a TV subgradient: its pairing with u is
    gamma TV(u) and with any w at most gamma TV(w)); and ||Pa - Pb||^2 <= <Pa - Pb, a - b>."""
    shape = (6, 6)
    prior = _prior(n=36, k=4, seed=3, floor=0.02)
    reg = GaussianPrior(prior, tv=GAMMA)
    lam = 0.2
    a, b = _image(shape, 5), _image(shape, 6)
    pa, pb = reg.prox(a, lam), reg.prox(b, lam)
    diff = (pa - pb).reshape(-1)
    assert float(diff @ diff) <= float(diff @ (a - b).reshape(-1)) + 1e-10
    q = (a - pa) / lam - prior.gradient(pa)  # should lie in gamma dTV(pa)
    tv_u = float(tv_iso_value(pa)[0])
    assert abs(float((q * pa).sum()) - GAMMA * tv_u) <= 1e-6 * GAMMA * tv_u
    g = torch.Generator().manual_seed(9)
    for _ in range(20):  # <q, w> <= gamma TV(w) for every w (a support-function test)
        w = torch.randn(1, *shape, generator=g, dtype=torch.float64)
        assert float((q * w).sum()) <= GAMMA * float(tv_iso_value(w)[0]) + 1e-6


@pytest.mark.parametrize("box", [False, True])
def test_float32_prox_agrees_with_float64(box: bool) -> None:
    shape = (3, 5, 5)
    prior = _prior(n=75, k=4, seed=1, floor=0.02)
    lo, hi = (0.0, 1.0) if box else (-math.inf, math.inf)
    reg64 = GaussianPrior(prior, lo, hi, tv=GAMMA)
    v = _image(shape, 2)
    want = reg64.prox(v, 0.15)
    single = LowRankGaussian(prior.mean.float(), prior.factor.float(), prior.diag.float())
    got = GaussianPrior(single, lo, hi, tv=GAMMA).prox(v.float(), 0.15)
    assert got.dtype == torch.float32
    assert float((got.double() - want).norm()) <= 2e-4 * float(want.norm())


def test_the_split_is_gaussian_plus_gamma_tv() -> None:
    """value = G + gamma TV; K = gamma grad with ||K||^2 = gamma^2 ||grad||^2 (power
    iteration), adjoint <Kx, p> = <x, K^T p>; the dual prox is TV's ball projection; the
    subgradient is G's gradient plus gamma times TV's; gamma 0 is the plain prior."""
    prior = _prior(n=75, k=4, seed=2)
    reg = GaussianPrior(prior, tv=GAMMA)
    plain = GaussianPrior(prior)
    tv = make_regulariser("tv")
    x = _image((3, 5, 5), 1)
    torch.testing.assert_close(reg.value(x), plain.value(x) + GAMMA * tv.value(x))
    torch.testing.assert_close(reg.subgradient(x),
                               plain.subgradient(x) + GAMMA * tv.subgradient(x))
    p = torch.randn(1, 2, 3, 5, 5, dtype=torch.float64)
    assert abs(float((reg.K(x) * p).sum() - (x * reg.KT(p)).sum())) < 1e-10
    torch.testing.assert_close(reg.K(x), GAMMA * tv.K(x))
    z = torch.randn(1, 3, 5, 5, dtype=torch.float64)
    for _ in range(300):
        z = reg.KT(reg.K(z))
        z = z / z.norm()
    est = float((reg.K(z) ** 2).sum())
    bound = reg.K_norm_sq((3, 5, 5))
    assert est <= bound * (1 + 1e-9) and est >= 0.95 * bound
    torch.testing.assert_close(reg.prox_dual(3 * p, 0.1, 2.0), tv.prox_dual(3 * p, 0.1, 2.0))
    assert reg.has_dual and not plain.has_dual and plain.K_norm_sq((3, 5, 5)) == 0.0


def test_spec_grammar_and_refusals() -> None:
    prior = _prior(n=36)
    reg = make_regulariser({**parse_spec("gaussian+tv+box"), "prior": prior})
    assert isinstance(reg, GaussianPrior)
    assert (reg.tv, reg.lo, reg.hi) == (DEFAULT_TV_WEIGHT, 0.0, 1.0)
    assert reg.spec() == {"name": "gaussian", "prior": "abc123", "tv": DEFAULT_TV_WEIGHT,
                          "box": [0.0, 1.0]}
    assert "tv" in reg.describe()
    again = make_regulariser({**reg.spec(), "prior": prior})
    assert again == reg
    assert make_regulariser({**parse_spec("Gaussian+TV=0.25"), "prior": prior}).tv == 0.25
    assert make_regulariser({**parse_spec("gaussian"), "prior": prior}).has_dual is False
    for bad in ("gaussian+tv=-1", "gaussian+tv=nan", "gaussian+tv=inf", "gaussian+tv=abc"):
        with pytest.raises(InputError, match="TV weight") as err:
            make_regulariser({**parse_spec(bad), "prior": prior})
        assert "\n" not in str(err.value)
    with pytest.raises(InputError, match="unknown option"):
        make_regulariser("tv+tv")
    with pytest.raises(InputError, match=r"\+tv"):
        parse_spec("gaussian+smooth")
