"""The Gaussian input prior in every method, against an independent minimiser of the same
objective: scipy's L-BFGS-B on the lifted objective (the problem's own ``objective_parts``, its
gradient by torch autograd) in float64, with the box [0, 1] on x_0 and x_l >= 0 on the ReLU
blocks as bounds. Also TV + box in the accelerated joint method (now its default path) against
the paper's coordinate descent, and the torch FGP with a box against the compiled one."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from lbi_engine.problem import InversionProblem
from lbi_engine.regularisers import GaussianPrior, LowRankGaussian
from lbi_engine.solvers import StopRule, final, solve
from tests.engine._nets import relu_mlp
from tests.engine._solver_cases import disc, noisy, problem_for


def _prior(n: int, k: int = 5, seed: int = 1) -> LowRankGaussian:
    """A prior shaped like images: mean a soft disc, a few smooth modes, a small floor."""
    g = torch.Generator().manual_seed(seed)
    side = int(round(n**0.5))
    mean = 0.6 * disc(side, side / 3).reshape(-1) + 0.1
    factor = 0.15 * torch.randn(n, k, generator=g, dtype=torch.float64)
    diag = 0.004 + 0.01 * torch.rand(n, generator=g, dtype=torch.float64)
    return LowRankGaussian(mean, factor, diag)


def _problem(widths: tuple[int, ...], alpha: float, box: bool = True,
             dtype: torch.dtype = torch.float64) -> InversionProblem:
    net = relu_mlp(widths, seed=3, gain=1.5, dtype=dtype)
    side = int(round(widths[0] ** 0.5))
    x_true = disc(side, side / 3, dtype).reshape(1, -1) * 0.9
    y_delta, delta = noisy(net, x_true, 0.05, seed=2)
    reg = GaussianPrior(_prior(widths[0]), *((0.0, 1.0) if box else ()))
    return InversionProblem(net, y_delta, reg, alpha, x_true=x_true, delta=delta,
                            image_shape=(1, side, side))


def _lbfgs(problem: InversionProblem, lifted: bool) -> tuple[np.ndarray, float]:
    """(x_0, objective) minimising the lifted objective over (x_0, x_1, ..) (``lifted``) or
    the one-layer objective over x_0, by L-BFGS-B with the constraints as bounds. Written
    out from MATH.md §1.2 with dense matrices: for ReLU, B(x, z) = ½||x||^2 + ½||z_+||^2 -
    <x, z>; the prior ½ v^T Sigma^{-1} v with Sigma formed and inverted densely."""
    from tests.engine._solver_cases import dense

    maps = [dense(layer.affine) for layer in problem.network.layers]
    prior = problem.regulariser.prior
    mu = prior.mean.numpy()
    prec = np.linalg.inv((prior.factor @ prior.factor.T + torch.diag(prior.diag)).numpy())
    y = problem.y_delta.reshape(-1).numpy()
    if not lifted:
        maps = maps[:1]
    sizes = [a.shape[1] for a, _ in maps]

    def f(v: np.ndarray) -> tuple[float, np.ndarray]:
        xs = np.split(v, np.cumsum(sizes)[:-1])
        grads = [np.zeros_like(x) for x in xs]
        d = xs[0] - mu
        total = 0.5 * problem.alpha * d @ prec @ d
        grads[0] += problem.alpha * prec @ d
        for i, (a, b) in enumerate(maps):
            target = xs[i + 1] if i + 1 < len(xs) else y
            z = a @ xs[i] + b
            zp = np.maximum(z, 0.0)
            total += 0.5 * target @ target + 0.5 * zp @ zp - target @ z
            grads[i] += a.T @ (zp - target)
            if i + 1 < len(xs):
                grads[i + 1] += target - z
        return float(total), np.concatenate(grads)

    lo, hi = problem.regulariser.lo, problem.regulariser.hi
    bounds = [(lo, hi)] * sizes[0] + [(0.0, None)] * sum(sizes[1:])
    start = np.full(sum(sizes), 0.5)
    res = minimize(f, start, jac=True, method="L-BFGS-B", bounds=bounds,
                   options={"maxiter": 50000, "maxfun": 100000, "ftol": 1e-16, "gtol": 1e-12,
                            "maxcor": 30})
    return res.x[:sizes[0]], float(res.fun)


@pytest.mark.parametrize("box", [True, False])
def test_joint_accelerated_reaches_the_lbfgs_minimiser(box: bool) -> None:
    problem = _problem((36, 24, 12), alpha=0.02, box=box)
    record = final(solve(problem, "joint", stop=StopRule(max_iter=20000, tol=1e-12)))
    assert record.extras["steps"] == "accelerated"
    want_x, want_f = _lbfgs(problem, lifted=True)
    got = record.x.reshape(-1).numpy()
    assert float(record.objective[0]) == pytest.approx(want_f, rel=1e-7, abs=1e-9)
    np.testing.assert_allclose(got, want_x, atol=2e-4)
    if box:
        assert got.min() >= 0.0 and got.max() <= 1.0
        assert (got < 1e-9).any() or (got > 1 - 1e-9).any()  # the box is active


def test_one_layer_reaches_the_lbfgs_minimiser() -> None:
    problem = _problem((36, 30), alpha=0.05)
    record = final(solve(problem, "pdhg", stop=StopRule(max_iter=40000, tol=1e-12,
                                                        tol_mode="relative")))
    want_x, want_f = _lbfgs(problem, lifted=False)
    assert float(record.objective[0]) == pytest.approx(want_f, rel=1e-6, abs=1e-9)
    np.testing.assert_allclose(record.x.reshape(-1).numpy(), want_x, atol=5e-4)


def test_float32_joint_run_agrees_with_float64() -> None:
    stop = StopRule(max_iter=5000, tol=1e-6)
    x64 = final(solve(_problem((36, 24, 12), 0.02), "joint", stop=stop)).x
    x32 = final(solve(_problem((36, 24, 12), 0.02, dtype=torch.float32), "joint", stop=stop)).x
    assert x32.dtype == torch.float32
    assert float((x32.double() - x64).abs().max()) < 5e-3


def _accelerated_and_sweeps(problem: InversionProblem, tol_fast: float, tol_paper: float
                            ) -> tuple[Any, Any]:
    """The joint method's accelerated run and its coordinate descent (steps "safe"), both
    from where the accelerated run starts (the lifted objective is not jointly convex)."""
    from lbi_engine.solvers.joint.start import backprojection_start

    fast = final(solve(problem, "joint", stop=StopRule(max_iter=20000, tol=tol_fast)))
    assert fast.extras["steps"] == "accelerated"
    paper = final(solve(problem, "joint", stop=StopRule(max_iter=200000, tol=tol_paper,
                                                        tol_mode="relative"),
                        options={"steps": "safe"}, init={"x": backprojection_start(problem)}))
    assert paper.extras.get("steps") != "accelerated"
    return fast, paper


def test_tv_box_accelerated_joint_agrees_with_coordinate_descent() -> None:
    net = relu_mlp((36, 24, 12), seed=3, gain=1.5)
    x_true = disc(6, 2.0).reshape(1, -1)
    problem = problem_for(net, x_true, 0.02, std=0.05, reg="tv+box", image_shape=(1, 6, 6))
    fast, paper = _accelerated_and_sweeps(problem, 1e-10, 1e-9)
    assert float(fast.x.min()) >= 0.0 and float(fast.x.max()) <= 1.0
    assert float(fast.objective[0]) == pytest.approx(float(paper.objective[0]), rel=1e-5)
    assert float((fast.x - paper.x).abs().max()) < 2e-3


@pytest.mark.parametrize("gamma", [0.0, 0.5])
def test_layerwise_input_stage_solves_its_problem_with_the_prior(gamma: float) -> None:
    """The layer-wise method's last stage, x_0 against its estimate of x_1, with the Gaussian
    prior + box (and gamma TV), against cvxpy (Sigma inverted densely)."""
    import cvxpy as cp

    from tests.engine._solver_cases import cvx_bregman, cvx_tv, dense, with_feature_prior

    base = _problem((36, 72, 108), alpha=0.05)
    problem = with_feature_prior(_with_tv(base, gamma) if gamma else base)
    last = final(solve(problem, "layerwise", stop=StopRule(max_iter=20000, tol=1e-10),
                       options={"input_alpha": "given"}, report_every=500))
    x1 = last.aux[0][0].numpy()
    a1, b1 = dense(problem.network.layers[0].affine)
    prior = problem.regulariser.prior
    mu = prior.mean.numpy()
    prec = np.linalg.inv((prior.factor @ prior.factor.T + torch.diag(prior.diag)).numpy())
    x0 = cp.Variable(36)
    objective = cvx_bregman("relu", x1, a1 @ x0 + b1) \
        + 0.05 / 2 * cp.quad_form(x0 - mu, cp.psd_wrap(0.5 * (prec + prec.T)))
    if gamma:
        objective = objective + 0.05 * gamma * cvx_tv(x0, 6, 6)
    task = cp.Problem(cp.Minimize(objective), [x0 >= 0, x0 <= 1])
    task.solve(solver="CLARABEL")
    assert task.status == "optimal"
    value = float(task.value)
    stage = float(last.bregman_terms[0, 0] + last.reg_term[0])
    assert abs(stage - value) < 1e-5 * abs(value)
    np.testing.assert_allclose(last.x[0].numpy(), x0.value, atol=1e-3)


# -- the Gaussian prior plus TV (R = G + gamma TV, "gaussian+tv") ------------------------------
GAMMA = 0.5


def _with_tv(problem: InversionProblem, gamma: float = GAMMA) -> InversionProblem:
    reg = problem.regulariser
    assert isinstance(reg, GaussianPrior)
    return InversionProblem(problem.network, problem.y_delta,
                            GaussianPrior(reg.prior, reg.lo, reg.hi, tv=gamma), problem.alpha,
                            x_true=problem.x_true, delta=problem.delta, image_shape=(1, 6, 6))


@pytest.mark.parametrize("box", [True, False])
def test_gaussian_tv_one_layer_is_the_cvxpy_minimiser(box: bool) -> None:
    """One layer (Condat–Vũ with the split K = gamma grad) against cvxpy on the convex
    objective B(y, W x + b) + alpha (G(x) + gamma TV(x)) (+ box), Sigma inverted densely."""
    import cvxpy as cp

    from tests.engine._solver_cases import cvx_bregman, cvx_tv, dense

    problem = _with_tv(_problem((36, 30), alpha=0.05, box=box))
    record = final(solve(problem, "pdhg", stop=StopRule(max_iter=40000, tol=1e-12,
                                                        tol_mode="relative")))
    a, b = dense(problem.network.layers[0].affine)
    prior = problem.regulariser.prior
    mu = prior.mean.numpy()
    prec = np.linalg.inv((prior.factor @ prior.factor.T + torch.diag(prior.diag)).numpy())
    x0 = cp.Variable(36)
    objective = cvx_bregman("relu", problem.y_delta[0].numpy(), a @ x0 + b) \
        + 0.05 / 2 * cp.quad_form(x0 - mu, cp.psd_wrap(0.5 * (prec + prec.T))) \
        + 0.05 * GAMMA * cvx_tv(x0, 6, 6)
    task = cp.Problem(cp.Minimize(objective), [x0 >= 0, x0 <= 1] if box else [])
    task.solve(solver="CLARABEL")
    assert task.status == "optimal"
    # the objective's constant (½||y||^2 + Psi(y)) is in both
    assert float(record.objective[0]) == pytest.approx(float(task.value), rel=1e-6)
    np.testing.assert_allclose(record.x.reshape(-1).numpy(), x0.value, atol=1e-3)


@pytest.mark.parametrize("box", [True, False])
def test_gaussian_tv_accelerated_joint_agrees_with_coordinate_descent(box: bool) -> None:
    """The accelerated joint step (G in the smooth part, the metric TV + box prox) against
    the paper's sweeps (Condat–Vũ with the split): two independent algorithms, one minimum
    (from the same start: the lifted objective is not jointly convex)."""
    problem = _with_tv(_problem((36, 24, 12), alpha=0.02, box=box))
    fast, paper = _accelerated_and_sweeps(problem, 1e-11, 1e-10)
    if box:
        assert float(fast.x.min()) >= 0.0 and float(fast.x.max()) <= 1.0
    assert float(fast.objective[0]) == pytest.approx(float(paper.objective[0]), rel=1e-6)
    assert float((fast.x - paper.x).abs().max()) < 1e-3
    # TV matters at this weight: the plain prior's minimum is elsewhere
    plain = final(solve(_problem((36, 24, 12), alpha=0.02, box=box), "joint",
                        stop=StopRule(max_iter=20000, tol=1e-11)))
    assert float((plain.x - fast.x).abs().max()) > 1e-2
