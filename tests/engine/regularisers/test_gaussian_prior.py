"""The learned Gaussian input prior: value, gradient and prox against dense float64 algebra,
scipy (box-constrained prox by L-BFGS-B) and cvxpy (the same QP), float32 and float64."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lbi_engine.errors import InputError
from lbi_engine.regularisers import GaussianPrior, LowRankGaussian, make_regulariser


def _prior(n: int = 36, k: int = 4, seed: int = 0, floor: float = 0.01) -> LowRankGaussian:
    g = torch.Generator().manual_seed(seed)
    mean = torch.rand(n, generator=g, dtype=torch.float64) * 0.5 + 0.25
    factor = torch.randn(n, k, generator=g, dtype=torch.float64) * 0.2
    diag = torch.rand(n, generator=g, dtype=torch.float64) * 0.05 + floor
    return LowRankGaussian(mean, factor, diag, label="abc123")


def _dense(p: LowRankGaussian) -> tuple[np.ndarray, np.ndarray]:
    sigma = (p.factor @ p.factor.T + torch.diag(p.diag)).numpy()
    return p.mean.numpy(), np.linalg.inv(sigma)


def test_value_and_gradient_match_dense_algebra_and_autograd() -> None:
    prior = _prior()
    mu, prec = _dense(prior)
    x = torch.rand(3, 1, 6, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    reg = GaussianPrior(prior)
    v = (x.reshape(3, -1).numpy() - mu)
    want = 0.5 * np.einsum("bi,ij,bj->b", v, prec, v)
    np.testing.assert_allclose(reg.value(x).numpy(), want, rtol=1e-10)
    np.testing.assert_allclose(reg.subgradient(x).reshape(3, -1).numpy(), v @ prec, rtol=1e-9)
    xr = x.clone().requires_grad_(True)
    reg.value(xr).sum().backward()
    torch.testing.assert_close(xr.grad, reg.subgradient(x), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("per_sample", [False, True])
def test_unconstrained_prox_is_the_linear_solve(per_sample: bool) -> None:
    prior = _prior()
    mu, prec = _dense(prior)
    x = torch.rand(2, 36, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2 - 0.5
    alpha = torch.tensor([0.3, 2.0], dtype=torch.float64) if per_sample else 0.7
    step = 0.5
    u = GaussianPrior(prior).prox_primal(x, step, alpha)
    ts = [step * float(a) for a in (alpha if per_sample else [alpha, alpha])]
    for b, t in enumerate(ts):
        # optimality of ½||u - x||^2 + t/2 (u - mu)^T P (u - mu): (I + t P) u = x + t P mu
        want = np.linalg.solve(np.eye(36) + t * prec, x[b].numpy() + t * prec @ mu)
        np.testing.assert_allclose(u[b].numpy(), want, rtol=1e-9, atol=1e-11)


def test_box_prox_matches_cvxpy_and_scipy() -> None:
    cp = pytest.importorskip("cvxpy")
    from scipy.optimize import minimize

    prior = _prior(floor=0.002)
    mu, prec = _dense(prior)
    x = torch.rand(2, 36, generator=torch.Generator().manual_seed(1),
                   dtype=torch.float64) * 5.0 - 2.0
    t = 0.05  # step * alpha: the free solve leaves the box, and its clip is not the prox
    reg = GaussianPrior(prior, 0.0, 1.0)
    u = reg.prox_primal(x, 1.0, t).numpy()
    free = GaussianPrior(prior).prox_primal(x, 1.0, t).clamp(0.0, 1.0).numpy()
    chol = np.linalg.cholesky(prec)
    for b in range(2):
        xb = x[b].numpy()
        var = cp.Variable(36)
        obj = 0.5 * cp.sum_squares(var - xb) + 0.5 * t * cp.sum_squares(chol.T @ (var - mu))
        cp.Problem(cp.Minimize(obj), [var >= 0, var <= 1]).solve(solver=cp.CLARABEL)

        def f(w, xb=xb):
            d = w - mu
            return 0.5 * np.sum((w - xb) ** 2) + 0.5 * t * d @ prec @ d, \
                (w - xb) + t * prec @ d

        ref = minimize(f, np.clip(xb, 0, 1), jac=True, method="L-BFGS-B",
                       bounds=[(0, 1)] * 36, options={"ftol": 1e-15, "gtol": 1e-12})
        # optimality: u is a fixed point of the projected gradient step (KKT for a box)
        grad = (u[b] - xb) + t * prec @ (u[b] - mu)
        assert np.abs(u[b] - np.clip(u[b] - grad, 0.0, 1.0)).max() < 1e-9
        np.testing.assert_allclose(u[b], var.value, atol=1e-4)  # CLARABEL's accuracy: ~5e-5
        np.testing.assert_allclose(u[b], ref.x, atol=1e-6)
        assert np.abs(free[b] - ref.x).max() > 1e-3  # the clip is not the prox here
    assert u.min() >= 0.0 and u.max() <= 1.0 and reg.inner_steps > 0


def test_float32_prox_agrees_with_float64() -> None:
    prior = _prior(floor=0.005)
    x = torch.rand(2, 36, generator=torch.Generator().manual_seed(0),
                   dtype=torch.float64) * 1.4 - 0.2
    for reg in (GaussianPrior(prior), GaussianPrior(prior, 0.0, 1.0)):
        want = reg.prox_primal(x, 0.5, 1.0)
        got = reg.prox_primal(x.float(), 0.5, 1.0)
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.double(), want, atol=2e-5, rtol=0)
        assert float(reg.value(x.float())[0]) == pytest.approx(float(reg.value(x)[0]), rel=1e-4)


def test_factory_names_and_errors() -> None:
    prior = _prior()
    reg = make_regulariser({"name": "gaussian", "box": [0, 1], "prior": prior})
    assert isinstance(reg, GaussianPrior) and (reg.lo, reg.hi) == (0.0, 1.0)
    assert reg.spec() == {"name": "gaussian", "prior": "abc123", "box": [0.0, 1.0]}
    assert reg.describe() == "gaussian + box [0, 1] (abc123)"
    with pytest.raises(InputError, match="needs a fitted input prior"):
        make_regulariser("gaussian+box")
    with pytest.raises(InputError, match="has 36 values per sample"):
        reg.value(torch.zeros(1, 1, 5, 5))
    with pytest.raises(InputError, match="diagonal must be positive"):
        LowRankGaussian(prior.mean, prior.factor, -prior.diag)
    x = torch.full((1, 36), 2.0, dtype=torch.float64)
    assert math.isinf(float(reg.value(x)[0]))  # outside the box


def test_float32_value_is_summed_in_float64() -> None:
    """The value of a float32 image is the float64 value of the same numbers, rounded once.
    With the shipped colour prior (a small diagonal under strong low-rank directions, so that
    Woodbury's two terms nearly cancel) a float32 evaluation was 1e-4 off, which kept the
    objective stop rule (tol 1e-4) from ever firing on natural-cnn-ae."""
    from lbi_engine.data import natural_split
    from lbi_engine.data.resource_files import resources_dir
    from lbi_engine.priors.input import load_input_prior

    prior, _ = load_input_prior(resources_dir() / "models" / "natural-cnn-ae.input.prior")
    reg = GaussianPrior(prior)
    x32 = torch.from_numpy(natural_split("val")[:4])
    got = reg.value(x32)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), reg.value(x32.double()), rtol=2e-7, atol=0.0)
