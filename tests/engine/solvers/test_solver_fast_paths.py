"""The allocation-free pieces of the PDHG hot path against the plain operators they replace.

GradInto/DivAdd (flat-index grad and div on fixed buffers) against finite_differences.grad/div
and the adjoint identity; the in-place dual prox plans against the regularisers' own prox, the
primal ones (and the regularisers' primal prox) against the closed form; the "balanced" step
rule against the Condat–Vũ condition; Anderson mixing against the plain iteration's optimum;
the stopwatch against the caller's time between records.
"""

from __future__ import annotations

import math
import time

import pytest
import torch
from torch import nn

from lbi_engine.models.network import LiftedNetwork
from lbi_engine.operators.finite_differences import DivAdd, GradInto, div, grad, zero_unused
from lbi_engine.problem import InversionProblem
from lbi_engine.regularisers import make_regulariser
from lbi_engine.solvers import StopRule, final, solve, warm_start
from lbi_engine.solvers.one_layer.inplace import dense_matrix, dual_prox_plan, primal_prox_plan
from lbi_engine.solvers.one_layer.step_sizes import resolve_rule, step_sizes

SHAPES = [(1, 6, 7), (3, 5, 4), (1, 1, 6), (2, 6, 1), (1, 2, 2)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_grad_into_equals_grad(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, *shape, generator=gen, dtype=dtype)
    out = torch.full((3, 2, *shape), 7.0, dtype=dtype)  # stale values must be overwritten
    GradInto(x, out, shape)()
    torch.testing.assert_close(out, grad(x), rtol=0, atol=0)


@pytest.mark.parametrize("shape", SHAPES)
def test_div_add_equals_div_and_is_minus_the_adjoint(shape: tuple[int, ...]) -> None:
    gen = torch.Generator().manual_seed(2)
    p = zero_unused(torch.randn(2, 2, *shape, generator=gen, dtype=torch.float64), shape)
    x0 = torch.randn(2, *shape, generator=gen, dtype=torch.float64)
    x = x0.clone()
    DivAdd(p, x, shape)(0.3)
    torch.testing.assert_close(x, x0 + 0.3 * div(p), rtol=1e-14, atol=1e-14)
    # <grad u, p> = -<u, div p> with the flat operators alone
    u = torch.randn(2, *shape, generator=gen, dtype=torch.float64)
    g = torch.empty(2, 2, *shape, dtype=torch.float64)
    GradInto(u, g, shape)()
    d = torch.zeros_like(u)
    DivAdd(p, d, shape)(1.0)
    assert abs(float((g * p).sum() + (u * d).sum())) < 1e-12


@pytest.mark.parametrize("name", ["tv", "tv-aniso", "gradient-tikhonov"])
def test_dual_prox_plans_equal_the_regularisers_prox(name: str) -> None:
    reg = make_regulariser(name)
    gen = torch.Generator().manual_seed(3)
    p = 2.0 * torch.randn(3, 2, 2, 5, 6, generator=gen, dtype=torch.float64)
    expected = reg.prox_dual(p, 0.7, 0.05)
    dual_prox_plan(reg, p)(0.7, 0.05)
    torch.testing.assert_close(p, expected, rtol=1e-15, atol=1e-15)


# prox_{t g + iota_C}(x) in closed form, t = step * alpha, written out here rather than taken
# from the regulariser: g = 0 for TV and the constraints (so the prox is the projection onto
# C), g = ||x||_1 gives soft thresholding (then x >= 0 leaves max(x - t, 0)), and
# g = 1/2 ||x||^2 gives x / (1 + t).
_PRIMAL_PROX_CLOSED_FORM = {
    "tv": lambda x, t: x,
    "tv+box": lambda x, t: x.clamp(0.0, 1.0),
    "nonneg": lambda x, t: x.clamp_min(0.0),
    "l1+nonneg": lambda x, t: (x - t).clamp_min(0.0),
    "tikhonov": lambda x, t: x / (1.0 + t),
    "none": lambda x, t: x,
}


@pytest.mark.parametrize("name", sorted(_PRIMAL_PROX_CLOSED_FORM))
def test_primal_prox_plans_equal_the_closed_form_prox(name: str) -> None:
    reg = make_regulariser(name)
    gen = torch.Generator().manual_seed(4)
    x = 2.0 * torch.randn(3, 1, 5, 6, generator=gen, dtype=torch.float64)
    step, alpha = 0.7, 0.05
    expected = _PRIMAL_PROX_CLOSED_FORM[name](x.clone(), step * alpha)
    torch.testing.assert_close(reg.prox_primal(x, step, alpha), expected, rtol=1e-15,
                               atol=1e-15)
    assert not torch.equal(expected, x) or name in ("tv", "none")  # the case moves x
    plan = primal_prox_plan(reg, x)
    if plan is None:
        torch.testing.assert_close(x, expected, rtol=0, atol=0)
    else:
        plan(step, alpha)
        torch.testing.assert_close(x, expected, rtol=1e-15, atol=1e-15)


def test_dense_matrix_recognises_flatten_linear_chains_only() -> None:
    flat = LiftedNetwork.from_module(nn.Sequential(nn.Flatten(), nn.Linear(12, 5), nn.ReLU()),
                                     (1, 3, 4))
    w, b = dense_matrix(flat.layers[0].affine)
    assert tuple(w.shape) == (5, 12) and tuple(b.shape) == (5,)
    conv = LiftedNetwork.from_module(nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU()), (1, 5, 5))
    assert dense_matrix(conv.layers[0].affine) is None


@pytest.mark.parametrize("lipschitz", [1e-3, 0.6, 5.6, 2e3])
@pytest.mark.parametrize("alpha", [5e-3, 1.5e-2, 0.5])
def test_balanced_rule_satisfies_condat_vu_and_auto_resolves(lipschitz: float,
                                                             alpha: float) -> None:
    k_sq = 7.99518
    tx, tz = step_sizes("balanced", lipschitz, alpha, k_sq)
    assert 1 / tx - tz * alpha**2 * k_sq > lipschitz / 2 * (1 + 1e-9)
    safe = step_sizes("safe", lipschitz, alpha, k_sq)
    assert tz == pytest.approx(2 * safe[1], rel=1e-12)
    assert resolve_rule("auto", True) == "balanced" and resolve_rule("auto", False) == "safe"
    assert resolve_rule("paper", True) == "paper"


def _perceptron_problem(batch: int = 2) -> InversionProblem:
    torch.manual_seed(0)
    module = nn.Sequential(nn.Flatten(), nn.Linear(64, 40), nn.ReLU())
    net = LiftedNetwork.from_module(module, (1, 8, 8)).to(dtype=torch.float64)
    x_true = torch.zeros(batch, 1, 8, 8, dtype=torch.float64)
    x_true[:, :, 2:6, 3:7] = torch.linspace(0.5, 1.0, batch, dtype=torch.float64)[:, None,
                                                                                    None, None]
    return InversionProblem(net, net.forward(x_true), make_regulariser("tv"), 0.02)


def test_anderson_converges_to_the_cvxpy_minimum_faster_and_stays_feasible() -> None:
    import cvxpy as cp

    from tests.engine._solver_cases import cvx_bregman, cvx_solve, cvx_tv, dense

    problem = _perceptron_problem()
    a, b = dense(problem.network.layers[0].affine)
    minima = []
    for y in problem.y_delta.numpy():
        x = cp.Variable(a.shape[1])
        minima.append(cvx_solve(cvx_bregman("relu", y, a @ x + b) + 0.02 * cvx_tv(x, 8, 8)))
    minima = torch.tensor(minima, dtype=torch.float64)
    stop = StopRule(max_iter=1500, tol=0)
    plain = final(solve(problem, "pdhg", stop=stop, options={"steps": "balanced"}))
    mixed = final(solve(problem, "pdhg", stop=stop, options={"anderson": 5}))
    gap_plain = (plain.objective - minima) / minima
    gap_mixed = (mixed.objective - minima) / minima
    assert bool((gap_mixed > -1e-7).all())  # never below the minimum (to cvxpy's accuracy)
    assert float(gap_mixed.max()) < 5e-6
    assert float(gap_mixed.max()) < 0.5 * float(gap_plain.max())
    z = mixed.warm.dual
    assert float((z * z).sum(dim=1).sqrt().max()) <= 1 + 1e-12


def test_anderson_warm_start_at_a_window_boundary_is_exact() -> None:
    problem = _perceptron_problem()
    options = {"anderson": 5}
    straight = final(solve(problem, "pdhg", stop=StopRule(max_iter=80, tol=0), options=options))
    first = final(solve(problem, "pdhg", stop=StopRule(max_iter=40, tol=0), options=options))
    resumed = final(solve(problem, "pdhg", stop=StopRule(max_iter=40, tol=0), options=options,
                          init=warm_start(first, problem)))
    torch.testing.assert_close(resumed.x, straight.x, rtol=0, atol=1e-13)


def test_solver_time_excludes_the_callers_time_between_records() -> None:
    problem = _perceptron_problem(batch=1)
    records = solve(problem, "pdhg", stop=StopRule(max_iter=40, tol=0), report_every=10)
    seen = []
    for record in records:
        seen.append(record.elapsed)
        time.sleep(0.05)  # the caller drawing something
    assert len(seen) == 6  # iterations 0, 10, 20, 30, 40 and the final record
    assert seen[-1] < 0.1, seen  # 4 pauses of 0.05 s would give >= 0.2 s
    assert all(math.isfinite(s) for s in seen)
