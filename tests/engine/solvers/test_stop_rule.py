"""The default stop rule (StopRule tol_mode="objective", solvers/_monitor.py).

What it promises: every method stops by itself in float32, with the objective within 1e-3
relative of the optimum. Checked against minima nobody in this project computed (cvxpy,
Clarabel) for one layer, against a long float64 run of the same method for several layers
(the lifted objective is not jointly convex, so no convex solver applies), and on
synthetic objective sequences where the rule's decision can be worked out by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lbi_engine.problem import InversionProblem
from lbi_engine.solvers import StopRule, final, solve
from lbi_engine.solvers._monitor import OBJECTIVE_MIN_RUN, RunMonitor
from lbi_engine.solvers.base import StopReason
from tests.engine._solver_cases import (
    cvx_bregman,
    cvx_solve,
    cvx_tv,
    dense,
    disc,
    problem_for,
    relu_mlp,
    relu_perceptron,
)

SIDE = 8


def _one_layer(reg: str, dtype: torch.dtype = torch.float32) -> InversionProblem:
    net = relu_perceptron(SIDE, 40, 0)
    x_true = torch.stack([disc(SIDE, r) for r in (2.5, 3.5)]).reshape(2, -1)
    p = problem_for(net, x_true, 0.02, std=0.05, reg=reg)
    return InversionProblem(net.to(dtype=dtype), p.y_delta.to(dtype), p.regulariser, 0.02,
                            x_true=x_true.to(dtype))


def _cvx_minima(problem: InversionProblem, box: bool) -> np.ndarray:
    import cvxpy as cp

    a, b = dense(problem.network.layers[0].affine)
    values = []
    for y in problem.y_delta.double().flatten(1).numpy():
        x = cp.Variable(a.shape[1])
        objective = cvx_bregman("relu", y, a @ x + b) + problem.alpha * cvx_tv(x, SIDE, SIDE)
        if box:
            prob = cp.Problem(cp.Minimize(objective), [x >= 0, x <= 1])
            prob.solve(solver="CLARABEL")
            assert prob.status == "optimal"
            values.append(prob.value)
        else:
            values.append(cvx_solve(objective))
    return np.array(values)


@pytest.mark.parametrize("reg, steps", [("tv", "auto"), ("tv", "balanced"),
                                        ("tv+box", "auto")])
def test_default_rule_stops_one_layer_float32_within_1e3_of_cvxpy(reg: str, steps: str) -> None:
    problem = _one_layer(reg)
    last = final(solve(problem, "pdhg", stop=StopRule(max_iter=20_000),
                       options={"steps": steps}))
    assert last.stop_reasons == ["tolerance", "tolerance"]
    assert last.iteration < 20_000
    minima = _cvx_minima(problem, box=reg == "tv+box")
    gap = (last.objective.double().numpy() - minima) / minima
    assert np.all(gap < 1e-3), gap
    assert np.all(gap > -1e-4), gap  # not below the optimum beyond float32 rounding


def test_default_rule_stops_joint_float32_within_1e3_of_a_long_float64_run() -> None:
    net = relu_mlp((36, 60, 48), seed=1, gain=1.5)
    x_true = torch.stack([disc(6, r) for r in (1.5, 2.5)]).reshape(2, -1)
    p64 = problem_for(net, x_true, 0.01, std=0.05, reg="tv")
    ref = final(solve(p64, "joint", stop=StopRule(max_iter=60_000, tol=0), report_every=100))
    p32 = InversionProblem(net.to(dtype=torch.float32), p64.y_delta.float(), p64.regulariser,
                           0.01, x_true=x_true.float())
    last = final(solve(p32, "joint", stop=StopRule(max_iter=60_000)))
    assert last.stop_reasons == ["tolerance", "tolerance"]
    gap = (last.objective.double() - ref.objective) / ref.objective
    assert bool((gap.abs() < 1e-3).all()), gap


# -- the rule itself, on objective sequences worked out by hand ---------------------------------
def _monitor(tol: float, report_every: int = 10) -> RunMonitor:
    problem = _one_layer("tv")
    return RunMonitor(problem, "test", StopRule(tol=tol), None, report_every)


def _feed(monitor: RunMonitor, values: dict[int, list[float]]) -> int | None:
    """Reports E_k (one value per sample) at the given iterations; the first iteration at
    which every sample has stopped, else None."""
    for k in sorted(values):
        monitor.iteration = k
        monitor.objective_settled(torch.tensor(values[k], dtype=torch.float32))
        if not monitor.running:
            return k
    return None


def test_rule_fires_when_the_change_over_the_second_half_drops_below_tol() -> None:
    # E_k = 1 + 1/k: over [k/2, k] it moves by 1/k, relative to E_k by 1/(k+1)
    tol = 1e-3
    values = {k: [1 + 1 / k, 1 + 1 / k] for k in range(10, 5000, 10)}
    stopped = _feed(_monitor(tol), values)
    assert stopped is not None
    # first report k with (E_{k/2 rounded down to a report} - E_k) / E_k <= tol
    expected = next(k for k in range(OBJECTIVE_MIN_RUN, 5000, 10)
                    if (1 / (10 * ((k // 2) // 10)) - 1 / k) / (1 + 1 / k) <= tol)
    assert stopped == expected


def test_rule_does_not_fire_on_an_oscillation_wider_than_tol() -> None:
    # the mean is flat, but the objective swings by 1e-2: the max over the window sees it
    values = {k: [1 + 0.01 * (-1) ** (k // 10)] * 2 for k in range(10, 3000, 10)}
    assert _feed(_monitor(1e-3), values) is None


def test_samples_stop_independently_and_name_the_rule() -> None:
    monitor = _monitor(1e-3)
    values = {k: [1.0, 1 + 100 / k] for k in range(10, 400, 10)}
    assert _feed(monitor, values) is None
    assert monitor.reasons[0] == StopReason.TOLERANCE.value
    assert monitor.reasons[1] is None
    assert monitor.active.tolist() == [False, True]


def test_relative_and_absolute_modes_ignore_the_objective() -> None:
    problem = _one_layer("tv")
    monitor = RunMonitor(problem, "test", StopRule(tol=1e-3, tol_mode="relative"), None, 10)
    assert _feed(monitor, {k: [1.0, 1.0] for k in range(10, 200, 10)}) is None


# -- method auto -------------------------------------------------------------------------------
def test_auto_runs_one_layer_for_one_layer_and_joint_for_several() -> None:
    one = _one_layer("tv")
    rec = final(solve(one, "auto", stop=StopRule(max_iter=3)))
    ref = final(solve(one, "one-layer", stop=StopRule(max_iter=3)))
    assert rec.method == "one-layer"
    torch.testing.assert_close(rec.x, ref.x, rtol=0, atol=0)  # the same iteration exactly
    net = relu_mlp((36, 60, 48), seed=1)
    x_true = torch.stack([disc(6, 2.0)]).reshape(1, -1)
    deep = problem_for(net, x_true, 0.01, std=0.05)
    assert final(solve(deep, "auto", stop=StopRule(max_iter=3))).method == "joint"
    assert final(solve(one, "pdhg", stop=StopRule(max_iter=3))).method == "one-layer"
