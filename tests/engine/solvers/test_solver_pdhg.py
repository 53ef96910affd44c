"""PDHG on one layer (MATH.md §3) against solvers nobody in this project wrote.

* identity activation, W = I, b = 0: the problem is ROF denoising, solved by scikit-image's
  Chambolle projection algorithm (its source uses the same forward differences with a
  zero last difference, and its docstring states the objective
  sum |grad u| + lambda/2 (f - u)^2 with weight = 1/lambda, i.e. ½||u - f||^2 + weight TV(u))
  and by cvxpy;
* ReLU perceptrons with isotropic and anisotropic TV: cvxpy (Clarabel) on the closed-form
  Bregman loss, plus the saddle-point optimality conditions checked from the dual variable.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from skimage.restoration import denoise_tv_chambolle
from torch import nn

from lbi_engine.problem import InversionProblem
from lbi_engine.regularisers import make_regulariser
from lbi_engine.solvers import StopRule, final, solve
from lbi_engine.solvers.one_layer.method import step_sizes
from tests.engine._solver_cases import (
    cvx_bregman,
    cvx_solve,
    cvx_tv,
    dense,
    diff_matrices,
    disc,
    lift,
    noisy,
    relu_perceptron,
    tv_numpy,
)


def _rof_data(side: int = 16, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return disc(side, side / 3).numpy() + 0.2 * rng.standard_normal((side, side))


def _identity_problem(f: np.ndarray, weight: float, dtype: torch.dtype) -> InversionProblem:
    side = f.shape[0]
    n = side * side
    lin = nn.Linear(n, n)
    with torch.no_grad():
        lin.weight.copy_(torch.eye(n))
        lin.bias.zero_()
    net = lift(nn.Sequential(nn.Flatten(), lin), (1, side, side), dtype)
    assert net.layers[0].activation.name == "identity"
    y = torch.tensor(f, dtype=dtype).reshape(1, n)
    return InversionProblem(net, y, make_regulariser("tv"), weight)


@pytest.mark.parametrize("dtype, iters, rtol", [(torch.float64, 1200, 1e-3),
                                                (torch.float32, 1200, 2e-3)])
def test_identity_layer_is_rof_denoising(dtype: torch.dtype, iters: int, rtol: float) -> None:
    import cvxpy as cp

    f, weight = _rof_data(), 0.15
    side = f.shape[0]
    reference = denoise_tv_chambolle(f, weight=weight, eps=1e-12, max_num_iter=5000)
    u = cp.Variable(side * side)
    cvx_value = cvx_solve(0.5 * cp.sum_squares(u - f.reshape(-1)) + weight * cvx_tv(u, side, side))
    # The two references agree with each other (so both minimise the same objective) ...
    assert np.linalg.norm(reference.reshape(-1) - u.value) < 1e-4 * np.linalg.norm(u.value)
    skimage_value = 0.5 * ((reference - f) ** 2).sum() + weight * tv_numpy(reference, side, side)
    assert abs(skimage_value - cvx_value) < 1e-6 * cvx_value

    rec = final(solve(_identity_problem(f, weight, dtype), "pdhg",
                      stop=StopRule(max_iter=iters, tol=0), report_every=iters))
    x = rec.x.reshape(side, side).double().numpy()
    assert rec.x.dtype == dtype
    # ... and PDHG reaches them: solution to 1e-3 relative, objective to 1e-4.
    assert np.linalg.norm(x - reference) < rtol * np.linalg.norm(reference)
    assert abs(float(rec.objective[0]) - cvx_value) < 1e-4 * cvx_value


def _perceptron_case(seed: int, side: int = 8, m: int = 48, alpha: float = 0.05):
    net = relu_perceptron(side, m, seed)
    x_true = torch.stack([disc(side, 2.5), disc(side, 3.5) * 0.5]).reshape(2, side * side)
    y_delta, _ = noisy(net, x_true, 0.05, seed)
    return net, x_true, y_delta, alpha


def _cvx_perceptron(net, y_delta: torch.Tensor, alpha: float, side: int, isotropic: bool):
    import cvxpy as cp

    a, b = dense(net.layers[0].affine)
    values, solutions = [], []
    for y in y_delta.double().numpy():
        x = cp.Variable(a.shape[1])
        values.append(cvx_solve(cvx_bregman("relu", y, a @ x + b)
                                + alpha * cvx_tv(x, side, side, isotropic)))
        solutions.append(x.value)
    return np.array(values), np.array(solutions)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("reg", ["tv", "tv-aniso"])
def test_relu_perceptron_matches_cvxpy_and_is_optimal(seed: int, reg: str) -> None:
    side = 8
    net, _, y_delta, alpha = _perceptron_case(seed, side)
    problem = InversionProblem(net, y_delta, make_regulariser(reg), alpha)
    rec = final(solve(problem, "pdhg", stop=StopRule(max_iter=8000, tol=1e-9), report_every=100))
    assert rec.stop_reasons == ["tolerance", "tolerance"]
    values, solutions = _cvx_perceptron(net, y_delta, alpha, side, reg == "tv")
    objective = rec.objective.numpy()
    np.testing.assert_allclose(objective, values, rtol=1e-4)
    assert np.all(objective >= values - 1e-7 * values)  # cvxpy's value is the minimum
    x = rec.x.numpy()
    for k in range(2):
        assert np.linalg.norm(x[k] - solutions[k]) < 1e-3 * np.linalg.norm(solutions[k])

    # Optimality (MATH.md §3.3 "Monitoring", §8.3): W^T(sigma(Wx+b) - y) + alpha p = 0 with
    # p = -div z in dTV(x), |z_ij| <= 1, and TV(x) = <p, x>. Computed here from the dense W.
    a, b = dense(net.layers[0].affine)
    z = rec.warm.dual
    p = problem.reg.KT(z).numpy()
    zz = z.reshape(2, 2, side, side).numpy()
    for k in range(2):
        grad_f = a.T @ (np.maximum(a @ x[k] + b, 0) - y_delta[k].numpy())
        assert np.linalg.norm(grad_f + alpha * p[k]) < 1e-5 * np.linalg.norm(grad_f)
        tv = tv_numpy(x[k], side, side, isotropic=reg == "tv")
        assert abs(tv - p[k] @ x[k]) < 1e-6 * tv
        bound = np.sqrt((zz[k] ** 2).sum(axis=0)) if reg == "tv" else np.abs(zz[k])
        assert bound.max() <= 1 + 1e-12
        assert bound.max() > 0.999  # the constraint is active somewhere (TV is not 0)
    assert float(rec.extras["optimality"].max()) < 1e-5


def test_float32_run_reaches_the_float64_optimum() -> None:
    side = 8
    net, _, y_delta, alpha = _perceptron_case(0, side)
    values, _ = _cvx_perceptron(net, y_delta, alpha, side, True)
    problem = InversionProblem(net.to(dtype=torch.float32), y_delta.float(),
                               make_regulariser("tv"), alpha)
    rec = final(solve(problem, "pdhg", stop=StopRule(max_iter=4000, tol=1e-6), report_every=100))
    assert rec.x.dtype == torch.float32 and rec.objective.dtype == torch.float32
    np.testing.assert_allclose(rec.objective.double().numpy(), values, rtol=1e-4)


def test_step_rules_satisfy_their_conditions() -> None:
    """safe and conservative satisfy Condat–Vũ 1/tau_x - tau_z ||alpha K||^2 > L/2 for every
    regime; paper steps do only when ||W||^2 > 398 alpha ||K||^2/8 and warn otherwise."""
    side = 8
    k_sq = 4 * math.sin(math.pi * (side - 1) / (2 * side)) ** 2 * 2  # MATH.md §4.1
    for lipschitz in (1e-3, 0.03, 1.0, 50.0, 2e3):
        for alpha in (1e-3, 1.5e-2, 0.5):
            for rule in ("safe", "conservative"):
                tx, tz = step_sizes(rule, lipschitz, alpha, k_sq)
                assert 1 / tx - tz * alpha**2 * k_sq > lipschitz / 2 * (1 + 1e-9)
            tx, tz = step_sizes("paper", lipschitz, alpha, k_sq)
            assert (tx, tz) == pytest.approx((1.99 / lipschitz, 1 / (8 * alpha)))

    net = relu_perceptron(side, 48, 0)
    w_sq = np.linalg.norm(dense(net.layers[0].affine)[0], 2) ** 2
    y = net.forward(torch.zeros(1, side * side, dtype=torch.float64))
    for alpha, warned in ((1e-2 * w_sq / 398, False), (w_sq / 398 * 1.2, True)):
        problem = InversionProblem(net, y, make_regulariser("tv"), alpha)
        first = next(iter(solve(problem, "pdhg", options={"steps": "paper"})))
        assert ("warning" in first.extras) is warned
        assert first.extras["lipschitz"] == pytest.approx(w_sq, rel=1e-9)
        assert first.extras["tau_x"] == pytest.approx(1.99 / w_sq, rel=1e-9)


@pytest.mark.parametrize("reg", ["l1", "tikhonov", "gradient-tikhonov", "tv+box"])
def test_other_regularisers_match_cvxpy(reg: str) -> None:
    """The primal prox (g: l1, Tikhonov, a box) and the dual prox of a smooth h
    (gradient Tikhonov) each give the cvxpy minimum of B_ReLU(y, Wx + b) + alpha R(x)."""
    import cvxpy as cp

    side, alpha = 8, 0.05
    net, _, y_delta, _ = _perceptron_case(2, side)
    y_delta = y_delta[:1]
    problem = InversionProblem(net, y_delta, make_regulariser(reg), alpha)
    rec = final(solve(problem, "pdhg", stop=StopRule(max_iter=8000, tol=1e-10),
                      report_every=1000))
    a, b = dense(net.layers[0].affine)
    x = cp.Variable(side * side)
    dh, dw = diff_matrices(side, side)
    prior = {"l1": cp.norm1(x), "tikhonov": 0.5 * cp.sum_squares(x),
             "gradient-tikhonov": 0.5 * cp.sum_squares(dh @ x) + 0.5 * cp.sum_squares(dw @ x),
             "tv+box": cvx_tv(x, side, side)}[reg]
    constraints = [x >= 0, x <= 1] if reg == "tv+box" else []
    objective = cvx_bregman("relu", y_delta[0].numpy(), a @ x + b) + alpha * prior
    problem_cvx = cp.Problem(cp.Minimize(objective), constraints)
    problem_cvx.solve(solver="CLARABEL")
    assert problem_cvx.status == "optimal"
    assert float(rec.objective[0]) == pytest.approx(problem_cvx.value, rel=1e-5)
    if constraints:
        assert float(rec.x.min()) >= 0 and float(rec.x.max()) <= 1
