"""The accelerated pdhg method (FISTA + inexact TV prox, solvers/one_layer/accelerated.py).

References nobody in this project computed: cvxpy (Clarabel) minima of the same objectives;
the compiled prox (numba) against the torch prox; batches against per-sample runs; warm
starts against uninterrupted runs; and the fall-back to Condat–Vũ where it does not apply.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lbi_engine.problem import InversionProblem
from lbi_engine.regularisers import TVProx, make_regulariser
from lbi_engine.solvers import StopRule, final, solve, warm_start
from lbi_engine.solvers.one_layer import accelerated as _accelerated
from tests.engine._solver_cases import (
    cvx_bregman,
    cvx_solve,
    cvx_tv,
    dense,
    disc,
    problem_for,
    relu_perceptron,
    run,
)

SIDE = 8


def _problem(batch: int = 2, reg: str = "tv", dtype: torch.dtype = torch.float64,
             alpha: float = 0.02) -> InversionProblem:
    net = relu_perceptron(SIDE, 40, 0)
    radii = [2.5, 3.5, 2.0, 3.0][:batch]
    x_true = torch.stack([disc(SIDE, r) for r in radii]).reshape(batch, -1)
    problem = problem_for(net, x_true, alpha, std=0.05, reg=reg)
    if dtype != torch.float64:
        problem = InversionProblem(net.to(dtype=dtype), problem.y_delta.to(dtype),
                                   problem.regulariser, alpha, x_true=x_true.to(dtype))
    return problem


def _minima(problem: InversionProblem, isotropic: bool = True) -> torch.Tensor:
    import cvxpy as cp

    a, b = dense(problem.network.layers[0].affine)
    values = []
    for y in problem.y_delta.double().flatten(1).numpy():
        x = cp.Variable(a.shape[1])
        values.append(cvx_solve(cvx_bregman("relu", y, a @ x + b)
                                + problem.alpha * cvx_tv(x, SIDE, SIDE, isotropic)))
    return torch.tensor(values, dtype=torch.float64)


def _gap_history(problem: InversionProblem, minima: torch.Tensor, steps: str,
                 iters: int) -> list[tuple[int, float]]:
    records = run(problem, "pdhg", stop=StopRule(max_iter=iters, tol=0),
                  options={"steps": steps}, report_every=5)
    return [(r.iteration, float(((r.objective.double() - minima) / minima).max()))
            for r in records]


@pytest.mark.parametrize("isotropic", [True, False])
def test_reaches_the_cvxpy_minimum_in_far_fewer_iterations(isotropic: bool) -> None:
    problem = _problem(reg="tv" if isotropic else "tv-aniso")
    minima = _minima(problem, isotropic)
    fast = _gap_history(problem, minima, "auto", 300)
    plain = _gap_history(problem, minima, "balanced", 300)
    assert fast[-1][1] < 1e-7  # to cvxpy's accuracy
    assert min(g for _, g in fast) > -1e-7  # never below the minimum
    first = next(k for k, g in fast if g < 1e-5)
    first_plain = next((k for k, g in plain if g < 1e-5), 10**9)
    assert 2 * first <= first_plain, (first, first_plain)


@pytest.mark.parametrize("reg", ["tv", "tv+box"])
def test_optimality_residual_and_dual_certify_the_solution(reg: str) -> None:
    problem = _problem(reg=reg)
    rec = final(solve(problem, "pdhg", stop=StopRule(max_iter=400, tol=0)))
    assert rec.extras["steps"] == "accelerated"
    assert float(rec.extras["optimality"].max()) < 1e-5
    z = rec.warm.dual
    assert float((z * z).sum(dim=1).sqrt().max()) <= 1 + 1e-12  # inside the dual ball
    assert rec.extras["inner_steps"] > 0


@pytest.mark.parametrize("reg", ["tv", "tv+box"])
def test_compiled_prox_equals_the_torch_prox(monkeypatch: pytest.MonkeyPatch, reg: str) -> None:
    if not TVProx.compiles_on("cpu"):
        pytest.skip("numba not available")
    problem = _problem(reg=reg)
    stop = StopRule(max_iter=60, tol=0)
    compiled = final(solve(problem, "pdhg", stop=stop, options={"steps": "accelerated"}))
    monkeypatch.setenv("LBI_NO_NUMBA", "1")
    torch_path = final(solve(problem, "pdhg", stop=stop, options={"steps": "accelerated"}))
    assert compiled.extras["inner_steps"] == torch_path.extras["inner_steps"]
    torch.testing.assert_close(compiled.x, torch_path.x, rtol=0, atol=1e-9)
    torch.testing.assert_close(compiled.objective, torch_path.objective, rtol=1e-12, atol=0)


def test_batch_equals_per_sample_runs() -> None:
    problem = _problem(batch=3)
    stop = StopRule(max_iter=80, tol=0)
    batch = final(solve(problem, "pdhg", stop=stop))
    for i in range(3):
        single = InversionProblem(problem.network, problem.y_delta[i:i + 1],
                                  problem.regulariser, problem.alpha)
        one = final(solve(single, "pdhg", stop=stop))
        torch.testing.assert_close(batch.x[i:i + 1], one.x, rtol=0, atol=1e-10)


def test_samples_stop_on_their_own_and_stay_frozen() -> None:
    problem = _problem(batch=2)
    records = run(problem, "pdhg", stop=StopRule(max_iter=2000, tol=1e-7), report_every=1)
    stops = [max(r.iteration for r in records if bool(r.active[i])) for i in range(2)]
    assert records[-1].stop_reasons == ["tolerance", "tolerance"]
    early = int(np.argmin(stops))
    frozen = [r for r in records if r.iteration > stops[early]]
    assert frozen and all(torch.equal(r.x[early], frozen[0].x[early]) for r in frozen)


def test_warm_start_continues_exactly() -> None:
    problem = _problem()
    straight = final(solve(problem, "pdhg", stop=StopRule(max_iter=60, tol=0)))
    first = final(solve(problem, "pdhg", stop=StopRule(max_iter=25, tol=0)))
    resumed = final(solve(problem, "pdhg", stop=StopRule(max_iter=35, tol=0),
                          init=warm_start(first.to_numpy(), problem)))
    assert resumed.iteration == 60
    torch.testing.assert_close(resumed.x, straight.x, rtol=0, atol=1e-12)
    # a warm start from x and the dual alone (e.g. a Condat–Vũ record) converges as well
    partial = warm_start(first, problem)
    partial.pop("x_prev"), partial.pop("momentum")
    again = final(solve(problem, "pdhg", stop=StopRule(max_iter=300, tol=0), init=partial))
    long = final(solve(problem, "pdhg", stop=StopRule(max_iter=325, tol=0)))
    torch.testing.assert_close(again.objective, long.objective, rtol=1e-9, atol=0)


def test_float32_stays_float32_and_reaches_the_minimum() -> None:
    problem = _problem(dtype=torch.float32)
    minima = _minima(problem)
    rec = final(solve(problem, "pdhg", stop=StopRule(max_iter=300, tol=0)))
    assert rec.x.dtype == torch.float32 and rec.warm.dual.dtype == torch.float32
    gap = (rec.objective.double() - minima) / minima
    assert float(gap.abs().max()) < 2e-5


def test_objective_decreases_overall_with_restarts() -> None:
    """The restart keeps the iteration close to monotone: no report more than 1e-3 above
    the best so far, and the last one is the best to rounding."""
    problem = _problem()
    records = run(problem, "pdhg", stop=StopRule(max_iter=300, tol=0), report_every=1)
    values = np.array([float(r.objective.max()) for r in records])
    best = np.minimum.accumulate(values)
    assert float(((values - best) / best).max()) < 1e-3
    assert values[-1] <= best[-1] * (1 + 1e-12)


@pytest.mark.parametrize("reg, options", [
    ("tikhonov", {}),  # no dual part
    ("tv", {"anderson": 5}),  # Anderson mixing is a Condat–Vũ option
    ("tikhonov", {"steps": "accelerated"}),  # asked for, but not applicable
])
def test_falls_back_to_condat_vu_where_it_does_not_apply(reg: str, options: dict) -> None:
    problem = _problem(batch=1, reg=reg)
    rec = final(solve(problem, "pdhg", stop=StopRule(max_iter=5, tol=0), options=options))
    assert rec.extras["steps"] == "balanced"
    assert "inner_steps" not in rec.extras


def test_paper_and_old_rules_stay_selectable() -> None:
    problem = _problem(batch=1)
    for rule in ("paper", "safe", "balanced", "conservative"):
        rec = final(solve(problem, "pdhg", stop=StopRule(max_iter=3, tol=0),
                          options={"steps": rule}))
        assert rec.extras["steps"] == rule
    paper = final(solve(problem, "pdhg", stop=StopRule(max_iter=3, tol=0),
                        options={"steps": "paper"}))
    lipschitz = paper.extras["lipschitz"]
    assert paper.extras["tau_x"] == pytest.approx(1.99 / lipschitz, rel=1e-15)
    assert paper.extras["tau_z"] == pytest.approx(1 / (8 * problem.alpha), rel=1e-15)


def test_unsupported_regulariser_helper() -> None:
    from lbi_engine.settings.solver import SolverOptions

    plain = _problem(batch=1)
    boxed = _problem(batch=1, reg=make_regulariser("tv+box"))
    assert _accelerated.supported(plain, SolverOptions(steps="accelerated"), True)
    assert not _accelerated.supported(plain, SolverOptions(steps="accelerated"), False)
    assert _accelerated.supported(boxed, SolverOptions(steps="accelerated"), True)
    tikhonov = _problem(batch=1, reg=make_regulariser("tikhonov"))
    assert not _accelerated.supported(tikhonov, SolverOptions(steps="accelerated"), True)


def test_multichannel_image_compiled_equals_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Channels share one pixel ball (2 C components): the kernel's general loops."""
    from torch import nn

    from tests.engine._solver_cases import gaussian_init, lift

    if not TVProx.compiles_on("cpu"):
        pytest.skip("numba not available")
    module = gaussian_init(nn.Sequential(nn.Flatten(), nn.Linear(72, 50), nn.ReLU()), 3)
    net = lift(module, (2, 6, 6))
    x_true = torch.stack([disc(6, 2.0), disc(6, 1.5)]).reshape(1, 2, 6, 6)
    problem = problem_for(net, x_true, 0.02, std=0.02)
    stop = StopRule(max_iter=150, tol=0)
    compiled = final(solve(problem, "pdhg", stop=stop))
    monkeypatch.setenv("LBI_NO_NUMBA", "1")
    torch_path = final(solve(problem, "pdhg", stop=stop, options={"steps": "accelerated"}))
    assert compiled.extras["steps"] == torch_path.extras["steps"] == "accelerated"
    torch.testing.assert_close(compiled.x, torch_path.x, rtol=0, atol=1e-9)
    # and it minimises: a long Condat–Vũ run (a different iteration) ends at the same value
    slow = final(solve(problem, "pdhg", stop=StopRule(max_iter=6000, tol=0),
                       options={"steps": "balanced"}, report_every=6000))
    gap = (compiled.objective - slow.objective) / slow.objective
    assert abs(float(gap[0])) < 1e-6


def test_a_diverging_run_stops_with_its_last_finite_iterate() -> None:
    """step_scale (an experiment knob) far beyond 1/L makes FISTA blow up: the sample stops
    as diverged and keeps a finite iterate, as in the Condat–Vũ block."""
    problem = _problem(batch=1)
    rec = final(solve(problem, "pdhg", stop=StopRule(max_iter=3000, tol=0),
                      options={"steps": "accelerated", "step_scale": 50.0}))
    assert rec.stop_reasons == ["diverged"]
    assert bool(torch.isfinite(rec.x).all())
    assert rec.iteration < 3000


def test_convolutional_layer_reaches_the_cvxpy_minimum() -> None:
    """A map that is not one dense matrix (products through affine.apply/adjoint)."""
    from torch import nn

    from tests.engine._solver_cases import gaussian_init, lift

    module = gaussian_init(nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.ReLU()), 5)
    problem = problem_for(lift(module, (1, 8, 8)), disc(8, 2.5).reshape(1, 1, 8, 8), 0.05,
                          std=0.02)
    fast = final(solve(problem, "pdhg", stop=StopRule(max_iter=300, tol=0)))
    assert fast.extras["steps"] == "accelerated"
    gap = (fast.objective - _minima(problem)) / _minima(problem)
    assert -1e-7 < float(gap[0]) < 1e-7
