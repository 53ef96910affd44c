"""Sequential layer-wise inversion with learned Gaussian feature priors (docs/LAYERWISE.md).

Stage l (from the output down) must return
argmin_{h in dom Psi_{l-1}} B_{Psi_l}(x_l, W_l h + b_l) + w/2 (h - mu)^T Sigma^{-1} (h - mu)
for the previous stage's estimate x_l, and the last stage the perceptron problem with the
user's regulariser. Each stage is convex, so cvxpy (with Sigma inverted densely, not by the
Woodbury formula the solver uses) gives its exact minimum from the dense weights.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from lbi_engine.errors import InputError
from lbi_engine.solvers import StopRule, final
from tests.engine._solver_cases import (
    chain,
    cvx_bregman,
    cvx_solve,
    cvx_tv,
    dense,
    disc,
    problem_for,
    relu_mlp,
    relu_perceptron,
    run,
    with_feature_prior,
)


def _dense3(seed: int = 0) -> object:
    return relu_mlp((36, 72, 108, 144), seed)


def _problem(std: float = 0.02, **kw: object) -> object:
    problem = problem_for(_dense3(), disc(6, 2.0).reshape(1, 36), 0.05, std=std, **kw)
    return with_feature_prior(problem)


def _stage_ends(records: list) -> dict[str, object]:
    out: dict[str, object] = {}
    for r in records:
        out[r.stage] = r
    return out


def _dense_precision(prior: object) -> np.ndarray:
    u = prior.factor.double().numpy()
    return np.linalg.inv(u @ u.T + np.diag(prior.diag.double().numpy()))


def test_refused_before_running_without_a_feature_prior() -> None:
    problem = problem_for(_dense3(), disc(6, 2.0).reshape(1, 36), 0.05, std=0.02)
    with pytest.raises(InputError, match="feature-prior"):
        next(iter(run_iter(problem)))
    # a prior but neither a noise level nor layer weights: refused too
    problem = _problem()
    problem.delta = None
    with pytest.raises(InputError, match="noise level"):
        next(iter(run_iter(problem)))


def run_iter(problem: object) -> object:
    from lbi_engine.solvers import solve

    return solve(problem, "layerwise", stop=StopRule(max_iter=10))


def test_stages_are_named_budget_is_shared_and_stop_reasons_are_per_stage() -> None:
    problem = _problem()
    records = run(problem, "layerwise", stop=StopRule(max_iter=240, tol=0), report_every=20,
                  options={"input_alpha": "given"})
    stages = [r.stage for r in records]
    assert list(dict.fromkeys(stages)) == ["layer 3/3", "layer 2/3", "layer 1/3"]
    assert [r.iteration for r in records] == sorted(r.iteration for r in records)
    ends = _stage_ends(records)
    assert [ends[s].iteration for s in ("layer 3/3", "layer 2/3", "layer 1/3")] == [80, 160, 240]
    last = records[-1]
    assert last.final and last.stop_reasons == ["max_iterations"]
    summary = last.extras["stages"]
    assert [s["stage"] for s in summary] == ["layer 3/3", "layer 2/3", "layer 1/3"]
    assert [s["iterations"] for s in summary] == [80, 80, 80]
    assert all(s["stop_reasons"] == ["max_iterations"] for s in summary)
    # With a tolerance, a stage that converges says so and leaves its budget to the next.
    records = run(problem, "layerwise", stop=StopRule(max_iter=3000, tol=1e-7),
                  options={"input_alpha": "given"}, report_every=50)
    summary = records[-1].extras["stages"]
    assert summary[0]["stop_reasons"] == ["tolerance"] and summary[0]["iterations"] < 1000
    assert sum(s["iterations"] for s in summary) == records[-1].iteration <= 3000


def test_every_stage_solves_its_convex_subproblem() -> None:
    import cvxpy as cp

    alpha = 0.05
    problem = _problem()
    net = problem.network
    records = run(problem, "layerwise", stop=StopRule(max_iter=20000, tol=1e-10),
                  options={"input_alpha": "given"}, report_every=500)
    last = records[-1]
    assert [s["stop_reasons"] for s in last.extras["stages"]] == [["tolerance"]] * 3
    x1, x2 = (a[0].numpy() for a in last.aux)
    (a1, b1), (a2, b2), (a3, b3) = (dense(layer.affine) for layer in net.layers)
    y = problem.y_delta[0].numpy()
    weight = float(problem.delta[0]) ** 2 / y.size  # sigma^2 from the noise level
    priors = problem.feature_priors.layers

    def stage(a: np.ndarray, b: np.ndarray, data: np.ndarray, prior: object) -> tuple:
        h = cp.Variable(a.shape[1], nonneg=True)  # dom of the ReLU below
        mu = prior.mean.double().numpy()
        p = _dense_precision(prior)
        p = 0.5 * (p + p.T)
        value = cvx_solve(cvx_bregman("relu", data, a @ h + b)
                          + weight / 2 * cp.quad_form(h - mu, cp.psd_wrap(p)))
        return value, h.value

    ends = _stage_ends(records)
    for name, (a, b, data, prior, got) in {"layer 3/3": (a3, b3, y, priors[1], x2),
                                           "layer 2/3": (a2, b2, x2, priors[0], x1)}.items():
        value, solution = stage(a, b, data, prior)
        assert abs(float(ends[name].objective[0]) - value) < 1e-6 * value
        np.testing.assert_allclose(got, solution, atol=1e-4 * abs(solution).max())

    x0 = cp.Variable(36)
    value = cvx_solve(cvx_bregman("relu", x1, a1 @ x0 + b1) + alpha * cvx_tv(x0, 6, 6))
    stage1 = float(last.bregman_terms[0, 0] + last.reg_term[0])
    assert abs(stage1 - value) < 1e-5 * value
    np.testing.assert_allclose(last.x[0].numpy(), x0.value, atol=1e-3 * abs(x0.value).max())
    assert float(last.objective[0]) == float(last.bregman_terms.sum() + last.reg_term[0])


def test_layer_weights_change_the_result_and_solve_their_stage() -> None:
    """Leaky ReLU hidden layer (dom Psi = R: no constraint); layer_alphas replace sigma^2."""
    import cvxpy as cp

    net = chain([(nn.Linear(25, 40), {"name": "leaky_relu", "a": 0.2}),
                 (nn.Linear(40, 50), "identity")], (25,), seed=4)
    x_true = disc(5, 1.6).reshape(1, 25)
    results = {}
    for weight in (0.05, 2.0):
        problem = with_feature_prior(problem_for(net, x_true, 0.05, std=0.05,
                                                 layer_alphas=[weight]))
        records = run(problem, "layerwise", stop=StopRule(max_iter=6000, tol=1e-11),
                      report_every=500, options={"input_alpha": "given"})
        (a2, b2) = dense(net.layers[1].affine)
        prior = problem.feature_priors.layers[0]
        h = cp.Variable(40)
        mu = prior.mean.double().numpy()
        value = cvx_solve(cvx_bregman("identity", problem.y_delta[0].numpy(), a2 @ h + b2)
                          + weight / 2 * cp.quad_form(h - mu, cp.psd_wrap(
                              _dense_precision(prior))))
        end = _stage_ends(records)["layer 2/2"]
        assert abs(float(end.objective[0]) - value) < 1e-6 * value
        np.testing.assert_allclose(records[-1].aux[0][0].numpy(), h.value,
                                   atol=1e-4 * abs(h.value).max())
        assert records[-1].extras["stages"][0]["weight"] == [pytest.approx(weight)]
        results[weight] = records[-1]
    gap = float((results[0.05].aux[0] - results[2.0].aux[0]).norm())
    assert gap > 0.05 * float(results[2.0].aux[0].norm())
    assert float((results[0.05].x - results[2.0].x).norm()) > 1e-3


def test_input_alpha_follows_the_discrepancy_principle() -> None:
    """The largest alpha tried whose code discrepancy is within eta delta; when the chain
    cannot reach eta delta (saturation: the case for this small net, whose prior is fitted on
    300 perturbed copies of one disc) quasi-optimality among the alphas tried: the geometric
    mean of the neighbouring pair whose step ||x_k - x_k+1|| is the first local minimum."""
    problem = _problem(std=0.05)
    last = final(iter(run(problem, "layerwise", stop=StopRule(max_iter=5000),
                          options={"input_alpha": "discrepancy"})))
    trail = last.extras["alpha_search"]
    alpha = last.choice.alpha
    assert last.choice.rule.startswith("discrepancy principle")
    eta = 1.05
    ratios = dict((a, r) for a, r in trail)
    saturated = min(ratios.values()) > eta
    assert ("saturates" in last.choice.rule) is saturated
    if saturated:
        assert "quasi-optimality" in last.choice.rule
        tried = sorted(ratios, reverse=True)
        assert max(tried) > 0.1  # the search looked above its start too
        pairs = [math.sqrt(a * b) for a, b in zip(tried[:-1], tried[1:], strict=True)]
        assert min(abs(alpha / p - 1) for p in pairs) < 1e-9
    else:
        assert ratios[alpha] <= eta
        larger = [r for a, r in trail if a > alpha]
        assert larger and min(larger) > eta
        residual = problem.network.forward(last.x) - problem.y_delta
        assert float(residual.norm()) <= 1.1 * eta * float(problem.delta[0])
    # the final record is the full lifted objective at that alpha
    assert float(last.reg_term[0]) == pytest.approx(alpha * float(problem.reg.value(last.x)[0]))


def test_input_alpha_by_quasi_optimality_is_the_first_local_minimum() -> None:
    """The default rule: alphas from 0.9 down by 3 until ||x_k - x_k+1|| has its first local
    minimum; alpha is that pair's geometric mean (recomputed from independent solves)."""
    from dataclasses import replace

    from lbi_engine.solvers.alpha import sub_problem

    problem = _problem(std=0.05)
    last = final(iter(run(problem, "layerwise", stop=StopRule(max_iter=5000))))
    assert last.choice.rule.startswith("quasi-optimality")
    tried = sorted((a for a, _ in last.extras["alpha_search"]), reverse=True)
    assert tried[0] == pytest.approx(0.9)
    assert all(b == pytest.approx(a / 3) for a, b in zip(tried[:-1], tried[1:], strict=True))
    alpha = last.choice.alpha
    k = next(k for k in range(len(tried) - 1) if alpha == pytest.approx(
        math.sqrt(tried[k] * tried[k + 1])))
    # the same search with cold, converged solves of the input stage on the same features
    data = last.aux[0]
    xs = [final(iter(run(replace(sub_problem(problem, data, a)), "pdhg",
                         stop=StopRule(max_iter=20_000, tol=1e-8)))).x.double()
          for a in tried]
    steps = [float((b - a).norm()) for a, b in zip(xs[:-1], xs[1:], strict=True)]
    assert steps[k] <= steps[k + 1]  # a local minimum where the search found it ...
    assert all(steps[j] > steps[j + 1] for j in range(k))  # ... and the first from the top


def test_one_layer_layerwise_is_pdhg() -> None:
    net = relu_perceptron(6, 30, 0)
    problem = problem_for(net, disc(6, 2.0).reshape(1, 36), 0.05, std=0.02)
    rule = {"steps": "balanced"}
    a = run(problem, "layerwise", stop=StopRule(max_iter=100, tol=0), report_every=20,
            options=rule)
    b = run(problem, "pdhg", stop=StopRule(max_iter=100, tol=0), report_every=20, options=rule)
    assert {r.stage for r in a} == {"layer 1/1"}
    torch.testing.assert_close(a[-1].x, b[-1].x, rtol=0, atol=1e-13)
    torch.testing.assert_close(a[-1].objective, b[-1].objective, rtol=1e-13, atol=0)


def test_float32_layerwise_run_matches_float64() -> None:
    net = relu_mlp((36, 72, 108), 0, dtype=torch.float32)
    net64 = relu_mlp((36, 72, 108), 0)
    x = disc(6, 2.0).reshape(1, 36)
    out = []
    for network, dtype in ((net, torch.float32), (net64, torch.float64)):
        problem = with_feature_prior(problem_for(network, x.to(dtype), 0.05, std=0.02))
        out.append(run(problem, "layerwise", stop=StopRule(max_iter=400, tol=0),
                       options={"input_alpha": "given"}, report_every=50))
    assert out[0][-1].x.dtype == torch.float32
    np.testing.assert_allclose([float(r.objective[0]) for r in out[0]],
                               [float(r.objective[0]) for r in out[1]], rtol=2e-3)


def test_input_alpha_walk_over_plateaus_ends_at_the_lowest_pair() -> None:
    """Where every alpha gives the same input (a constant truth that a 1x1 convolution codes
    exactly: the data fit and TV are both 0 there), every quasi-optimality step is a plateau;
    the walk passes each one down to the path's lowest alpha and keeps that pair."""
    from lbi_engine.models.network import LiftedNetwork
    from lbi_engine.problem import InversionProblem
    from lbi_engine.regularisers import make_regulariser
    from lbi_engine.settings.solver import SolverOptions
    from lbi_engine.solvers.alpha.stage import LOWEST, search_alpha

    torch.manual_seed(0)
    conv = nn.Conv2d(1, 3, 1).double()
    with torch.no_grad():  # every channel active: the constant 0.5 is the only exact fit
        conv.weight.abs_()
        conv.bias.abs_()
    net = LiftedNetwork.from_module(nn.Sequential(conv, nn.ReLU()), (1, 2, 2))
    x = torch.full((1, 1, 2, 2), 0.5, dtype=torch.float64)
    y = net(x)
    problem = InversionProblem(net, y, make_regulariser("tv"), 0.1, x_true=x)
    found = search_alpha(problem, y, torch.tensor([0.01], dtype=torch.float64), 1.05,
                         SolverOptions(), torch.zeros_like(x), 1e-8, None, budget=100000)
    alphas = [a for a, _ in found.trail]
    assert alphas == sorted(alphas, reverse=True) and alphas[-1] / 3 < LOWEST  # the whole path
    assert math.isclose(found.alpha, math.sqrt(alphas[-2] * alphas[-1]))
    assert torch.allclose(found.x, x, atol=1e-6)
