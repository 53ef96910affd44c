"""The TV regulariser's prox (``TotalVariation.fgp`` / ``.prox``, regularisers/_tv_prox.py):
FGP on the dual, with the box inside it (constrained TV, Beck & Teboulle 2009).

References nobody in this project computed: cvxpy (Clarabel) solves of the same prox
problems, grey and colour, with and without the box or x >= 0; the duality gap from the
regulariser's own K and value (not the prox's fused loops); and the two backends (numba
kernel, torch) against each other on the warm-started, inexact prox the solvers run.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lbi_engine.regularisers import TotalVariation, TVProx, make_regulariser
from tests.engine._solver_cases import cvx_tv

H, W = 7, 6
BACKENDS = [False, pytest.param(True, marks=pytest.mark.skipif(
    not TVProx.compiles_on("cpu"), reason="numba is not usable here"))]


def _image(channels: int, seed: int) -> torch.Tensor:
    """Blocks plus noise reaching outside [0, 1], so that the box is active: float64."""
    g = torch.Generator().manual_seed(seed)
    x = torch.zeros(1, channels, H, W, dtype=torch.float64)
    x[:, :, :4] = 1.1
    x[:, 0, :, 3:] -= 0.4
    return x + 0.25 * torch.randn(x.shape, generator=g, dtype=torch.float64)


def _cvx_prox(v: torch.Tensor, lam: float, isotropic: bool, lo: float, hi: float
              ) -> tuple[np.ndarray, float]:
    """argmin_{lo <= u <= hi} 1/2 ||u - v||^2 + lam TV(u) (TV vectorial over channels)."""
    import cvxpy as cp

    channels = v.shape[1]
    u = cp.Variable(channels * H * W)
    tv = cvx_tv(u, H, W, isotropic, channels)
    constraints = ([u >= lo] if lo > -math.inf else []) + ([u <= hi] if hi < math.inf else [])
    task = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(u - v.reshape(-1).numpy()) + lam * tv),
                      constraints)
    task.solve(solver="CLARABEL")
    assert task.status == "optimal"
    return np.asarray(u.value).reshape(v.shape), float(task.value)


def _objective(reg: TotalVariation, u: torch.Tensor, v: torch.Tensor, lam: float) -> float:
    return float(0.5 * (u - v).square().sum() + lam * reg.value(u)[0])


@pytest.mark.parametrize("compiled", BACKENDS)
@pytest.mark.parametrize(("spec", "channels"), [
    ("tv+box", 1), ("tv-aniso+box", 1), ("tv+nonneg", 1), ("tv+box", 3), ("tv", 3)])
def test_prox_with_its_constraint_is_the_cvxpy_prox(spec: str, channels: int,
                                                    compiled: bool) -> None:
    reg = make_regulariser(spec)
    assert isinstance(reg, TotalVariation)
    v, lam = _image(channels, seed=channels), 0.12
    want, value = _cvx_prox(v, lam, reg.isotropic, reg.lo, reg.hi)
    u = reg.prox(v, lam, compiled=compiled)
    assert bool(reg.feasible(u).all())  # exactly in the set: value() is finite
    got = _objective(reg, u, v, lam)
    assert value - 1e-7 * abs(value) <= got <= value + 1e-9 * abs(value)
    # the objective is 1-strongly convex: the points agree to ~sqrt(cvxpy's accuracy)
    np.testing.assert_allclose(u.numpy(), want, atol=2e-5)
    if reg.constrained and reg.isotropic:
        # the box matters: clipping the unconstrained prox is worse (for anisotropic TV,
        # a submodular function's Lovász extension, the two coincide)
        clipped = reg._clip(TotalVariation(reg.isotropic).prox(v, lam, compiled=compiled))
        assert _objective(reg, clipped, v, lam) > value + 1e-4 * abs(value)


def _gap(reg: TotalVariation, u: torch.Tensor, p: torch.Tensor, lam: float) -> torch.Tensor:
    """lam (TV(u) - <grad u, p>) per sample, from the regulariser's K and value."""
    return lam * (reg.raw_value(u) - (reg.K(u) * p).flatten(1).sum(dim=1))


def _inexact(reg: TotalVariation, v: torch.Tensor, y: torch.Tensor, dual: torch.Tensor,
             lam: float, compiled: bool, active: torch.Tensor | None = None
             ) -> tuple[torch.Tensor, torch.Tensor, int]:
    prox = reg.fgp(v.shape[0], tuple(v.shape[1:]), v, compiled=compiled)
    assert prox.compiled == compiled
    prox.v.copy_(v)
    prox.y.copy_(y)
    prox.dual.copy_(dual)
    steps = prox(lam, active)
    return prox.u.clone(), prox.dual.clone(), steps


@pytest.mark.parametrize("compiled", BACKENDS)
@pytest.mark.parametrize("spec", ["tv", "tv+box"])
def test_the_solvers_inexact_prox_meets_its_gap_test_and_is_near_the_exact_one(
        spec: str, compiled: bool) -> None:
    """What a solver step asks of the prox: gap <= theta/2 ||u - y||^2, hence (1-strong
    convexity of the prox's objective) ||u - u*||^2 <= 2 gap."""
    reg = make_regulariser(spec)
    assert isinstance(reg, TotalVariation)
    torch.manual_seed(0)
    v = torch.rand(2, 1, 12, 12, dtype=torch.float64) * 1.4 - 0.2
    y = v + 0.05 * torch.randn_like(v)
    lam = 0.05
    u, p, steps = _inexact(reg, v, y, torch.zeros_like(reg.K(v)), lam, compiled)
    assert 0 < steps < 2 * 200
    assert float(p.square().sum(dim=1).sqrt().max()) <= 1 + 1e-12  # in the dual ball
    gap = _gap(reg, u, p, lam)
    step_sq = (u - y).flatten(1).square().sum(dim=1)
    rounding = 16 * torch.finfo(v.dtype).eps * lam * reg.raw_value(u)
    assert bool((gap <= torch.maximum(0.5 * step_sq, rounding) + 1e-15).all())
    exact = reg.prox(v, lam, compiled=compiled)
    assert bool(((u - exact).flatten(1).square().sum(dim=1) <= 2 * gap + 1e-12).all())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("spec", ["tv", "tv-aniso+box", "tv+box"])
@pytest.mark.parametrize("channels", [1, 2])
def test_the_backends_compute_the_same_iterates(spec: str, channels: int,
                                                dtype: torch.dtype) -> None:
    """Warm-started and inexact, as in a solver: same steps, same prox and dual to rounding;
    a sample marked inactive is left alone by both."""
    if not TVProx.compiles_on("cpu"):
        pytest.skip("numba is not usable here")
    reg = make_regulariser(spec)
    assert isinstance(reg, TotalVariation)
    g = torch.Generator().manual_seed(3)
    v = (torch.rand(3, channels, 9, 8, generator=g, dtype=torch.float64) * 1.4 - 0.2).to(dtype)
    y = v + 0.05
    # a warm start in the ball whose unused entries are 0 (a gradient field's)
    warm = reg.prox_dual(3.0 * reg.K(torch.randn(v.shape, generator=g, dtype=torch.float64)),
                         1.0, 1.0).to(dtype)
    active = torch.tensor([True, False, True])
    results = [_inexact(reg, v, y, warm, 0.07, compiled, active) for compiled in (False, True)]
    (u_t, p_t, steps_t), (u_c, p_c, steps_c) = results
    assert steps_t == steps_c > 0
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    torch.testing.assert_close(u_t[active], u_c[active], rtol=0, atol=tol)
    torch.testing.assert_close(p_t, p_c, rtol=0, atol=tol)
    torch.testing.assert_close(p_t[1], warm[1], rtol=0, atol=0)  # inactive: dual untouched


def _weights(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return 0.2 + 0.8 * torch.rand(shape, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("compiled", BACKENDS)
@pytest.mark.parametrize("channels", [1, 3])
def test_weighted_prox_is_the_cvxpy_prox(channels: int, compiled: bool) -> None:
    """The metric prox argmin_{0 <= u <= 1} sum (u - v)^2 / (2 w) + lam TV(u), w in (0, 1]
    per pixel (the joint method's step with the Gaussian prior + TV), by FGP with the
    primal map clip(v + w lam div p), against cvxpy on the weighted objective."""
    import cvxpy as cp

    v, lam = _image(channels, seed=channels + 10), 0.12
    w = _weights((channels, H, W), seed=channels)
    prox = TVProx(True, 0.0, 1.0, 1, (channels, H, W), torch.float64, compiled=compiled,
                  theta=0.0, inner_max=100_000, weight=w)
    assert prox.compiled == compiled
    prox.v.copy_(v)
    prox.y.copy_(v)
    prox(lam)
    u = cp.Variable(channels * H * W)
    tv = cvx_tv(u, H, W, True, channels)
    dist = cp.sum(cp.multiply(1.0 / (2.0 * w.reshape(-1).numpy()),
                              cp.square(u - v.reshape(-1).numpy())))
    task = cp.Problem(cp.Minimize(dist + lam * tv), [u >= 0, u <= 1])
    task.solve(solver="CLARABEL")
    assert task.status == "optimal"
    np.testing.assert_allclose(prox.u.reshape(-1).numpy(), u.value, atol=2e-5)
    # the weight matters: the unweighted prox is elsewhere
    plain = make_regulariser("tv+box")
    assert isinstance(plain, TotalVariation)
    assert float((plain.prox(v, lam) - prox.u).abs().max()) > 1e-2


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_backends_compute_the_same_weighted_iterates(dtype: torch.dtype) -> None:
    if not TVProx.compiles_on("cpu"):
        pytest.skip("numba is not usable here")
    g = torch.Generator().manual_seed(4)
    v = (torch.rand(2, 1, 9, 8, generator=g, dtype=torch.float64) * 1.4 - 0.2).to(dtype)
    w = _weights((1, 9, 8), seed=5)
    results = []
    for compiled in (False, True):
        prox = TVProx(True, 0.0, 1.0, 2, (1, 9, 8), dtype, compiled=compiled, weight=w)
        prox.v.copy_(v)
        prox.y.copy_(v + 0.05)
        steps = prox(0.07)
        results.append((prox.u.clone(), prox.dual.clone(), steps))
    (u_t, p_t, steps_t), (u_c, p_c, steps_c) = results
    assert steps_t == steps_c > 0
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    torch.testing.assert_close(u_t, u_c, rtol=0, atol=tol)
    torch.testing.assert_close(p_t, p_c, rtol=0, atol=tol)


def test_weights_outside_the_unit_interval_or_with_a_primal_map_are_refused() -> None:
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match=r"\(0, 1\]"):
            TVProx(True, 0.0, 1.0, 1, (1, 3, 3), torch.float64,
                   weight=torch.full((1, 3, 3), bad, dtype=torch.float64))
    with pytest.raises(ValueError, match="not both"):
        TVProx(True, 0.0, 1.0, 1, (1, 3, 3), torch.float64, primal=lambda u: None,
               weight=torch.ones(1, 3, 3, dtype=torch.float64))
