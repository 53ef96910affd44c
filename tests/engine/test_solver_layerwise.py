"""Sequential layer-wise inversion (MATH.md §5.5): every stage against cvxpy.

Stage l (from the output down) must return argmin_x B_{Psi_l}(x_l, W_l x + b_l)
+ a_{l-1} Psi_{l-1}(x) + beta/2 ||x||^2 for the previous stage's estimate x_l, and the last
stage the perceptron problem with the user's regulariser. Each stage is convex, so cvxpy
gives its exact minimum from the dense weights.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from lbi_engine import metrics
from lbi_engine.problem import InversionProblem
from lbi_engine.regularisers import make_regulariser
from lbi_engine.solvers import StopRule, final
from tests.engine._nets import seeded_cnn_encoder
from tests.engine._solver_cases import (
    chain,
    cvx_bregman,
    cvx_solve,
    cvx_tv,
    dense,
    disc,
    lift,
    problem_for,
    relu_mlp,
    relu_perceptron,
    run,
)


def _dense3(seed: int = 0) -> object:
    return relu_mlp((36, 72, 108, 144), seed)


def _stage_ends(records: list) -> dict[str, object]:
    """The last record of every stage."""
    out: dict[str, object] = {}
    for r in records:
        out[r.stage] = r
    return out


def test_stages_are_named_and_iterations_continue() -> None:
    problem = problem_for(_dense3(), disc(6, 2.0).reshape(1, 36), 0.05, std=0.01)
    # The stages share max_iter: 240 in total, 80 each.
    records = run(problem, "layerwise", stop=StopRule(max_iter=240, tol=0), report_every=20)
    stages = [r.stage for r in records]
    assert stages[0] == "layer 3/3" and stages[-1] == "layer 1/3"
    assert list(dict.fromkeys(stages)) == ["layer 3/3", "layer 2/3", "layer 1/3"]
    iterations = [r.iteration for r in records]
    assert iterations == sorted(iterations)
    ends = _stage_ends(records)
    assert [ends[s].iteration for s in ("layer 3/3", "layer 2/3", "layer 1/3")] == [80, 160, 240]
    assert records[-1].final and records[-1].stop_reasons == ["max_iterations"]
    assert sum(r.final for r in records) == 1
    # Inside a stage the stage objective decreases (FISTA / PDHG on a convex problem).
    for stage in ("layer 3/3", "layer 2/3", "layer 1/3"):
        values = [float(r.objective[0]) for r in records if r.stage == stage]
        assert values[-1] < values[0]


def test_every_stage_solves_its_convex_subproblem() -> None:
    import cvxpy as cp

    alpha, beta = 0.05, 0.05
    net = _dense3()
    problem = problem_for(net, disc(6, 2.0).reshape(1, 36), alpha, std=0.01)
    records = run(problem, "layerwise", stop=StopRule(max_iter=2000, tol=1e-10),
                  options={"layer_tikhonov": beta}, report_every=100)
    last = records[-1]
    x1, x2 = (a[0].numpy() for a in last.aux)
    (a1, b1), (a2, b2), (a3, b3) = (dense(layer.affine) for layer in net.layers)
    y = problem.y_delta[0].numpy()

    def stage(a: np.ndarray, b: np.ndarray, data: np.ndarray) -> tuple[float, np.ndarray]:
        x = cp.Variable(a.shape[1], nonneg=True)  # a_{l-1} Psi_{l-1} = indicator of x >= 0
        value = cvx_solve(cvx_bregman("relu", data, a @ x + b) + beta / 2 * cp.sum_squares(x))
        return value, x.value

    ends = _stage_ends(records)
    for name, (a, b, data, got) in {"layer 3/3": (a3, b3, y, x2),
                                    "layer 2/3": (a2, b2, x2, x1)}.items():
        value, solution = stage(a, b, data)
        assert abs(float(ends[name].objective[0]) - value) < 1e-6 * value
        np.testing.assert_allclose(got, solution, atol=1e-4 * abs(solution).max())

    x0 = cp.Variable(36)
    value = cvx_solve(cvx_bregman("relu", x1, a1 @ x0 + b1) + alpha * cvx_tv(x0, 6, 6))
    # The final record reports the full lifted objective; its first Bregman term plus
    # alpha TV is the input stage's objective.
    stage1 = float(last.bregman_terms[0, 0] + last.reg_term[0])
    assert abs(stage1 - value) < 1e-5 * value
    np.testing.assert_allclose(last.x[0].numpy(), x0.value, atol=1e-3 * abs(x0.value).max())
    terms = last.bregman_terms[0].numpy()
    assert abs(terms[1] - cvx_bregman_value(x2, a2 @ x1 + b2)) < 1e-9 * max(1.0, terms[1])
    assert float(last.objective[0]) == float(last.bregman_terms.sum() + last.reg_term[0])


def cvx_bregman_value(y: np.ndarray, z: np.ndarray) -> float:
    """B_ReLU(y, z) = ½||y||^2 + ½||z_+||^2 - <y, z> (MATH.md §2.3), numerically."""
    return float(0.5 * y @ y + 0.5 * np.maximum(z, 0) @ np.maximum(z, 0) - y @ z)


def test_layer_weights_enter_through_the_prox_of_a_non_indicator_psi() -> None:
    """Leaky ReLU hidden layer: Psi(x) = (1-a)/(2a) min(x, 0)^2, so layer_alphas matters."""
    import cvxpy as cp

    slope, weight = 0.2, 0.7
    net = chain([(nn.Linear(25, 40), {"name": "leaky_relu", "a": slope}),
                 (nn.Linear(40, 50), "identity")], (25,), seed=4)
    problem = problem_for(net, disc(5, 1.6).reshape(1, 25) - 0.5, 0.05, std=0.05,
                          layer_alphas=[weight])
    records = run(problem, "layerwise", stop=StopRule(max_iter=6000, tol=1e-11),
                  report_every=500, options={"layer_tikhonov": 0.0})
    (a2, b2) = dense(net.layers[1].affine)
    y = problem.y_delta[0].numpy()
    x = cp.Variable(40)
    value = cvx_solve(cvx_bregman("identity", y, a2 @ x + b2)
                      + weight * (1 - slope) / (2 * slope) * cp.sum_squares(cp.neg(x)))
    end = _stage_ends(records)["layer 2/2"]
    assert abs(float(end.objective[0]) - value) < 1e-6 * value
    np.testing.assert_allclose(records[-1].aux[0][0].numpy(), x.value,
                               atol=1e-4 * abs(x.value).max())
    assert float(records[-1].aux[0].min()) < 0  # leaky ReLU: negative states are allowed


def test_one_layer_layerwise_is_pdhg() -> None:
    net = relu_perceptron(6, 30, 0)
    problem = problem_for(net, disc(6, 2.0).reshape(1, 36), 0.05, std=0.02)
    # the same Condat–Vũ rule (pdhg's default is the accelerated method)
    rule = {"steps": "balanced"}
    a = run(problem, "layerwise", stop=StopRule(max_iter=100, tol=0), report_every=20,
            options=rule)
    b = run(problem, "pdhg", stop=StopRule(max_iter=100, tol=0), report_every=20, options=rule)
    assert {r.stage for r in a} == {"layer 1/1"}
    torch.testing.assert_close(a[-1].x, b[-1].x, rtol=0, atol=1e-13)
    torch.testing.assert_close(a[-1].objective, b[-1].objective, rtol=1e-13, atol=0)


def test_paper_cnn_encoder_inverts_end_to_end() -> None:
    """With a small Tikhonov term on the ReLU stages (MATH.md A4). Without it the stages
    for x_2 (784 unknowns, 300 codes) and x_1 (1568 unknowns, 784 data) are
    under-determined, their estimates are far from any forward state and the result is
    worse than zeros (measured PSNR -4.1 dB vs 5.8 dB): see the report."""
    net = lift(seeded_cnn_encoder(), (1, 28, 28))
    x_true = disc(28, 8.0).reshape(1, 1, 28, 28)
    problem = problem_for(net, x_true, 1e-3, std=0.0)
    records = run(problem, "layerwise", stop=StopRule(max_iter=300),
                  options={"layer_tikhonov": 0.1}, report_every=50)
    first, last = records[0], records[-1]
    assert [r.stage for r in (first, last)] == ["layer 3/3", "layer 1/3"]
    assert torch.isfinite(last.objective).all() and torch.isfinite(last.x).all()
    assert [tuple(a.shape[1:]) for a in last.aux] == [(8, 14, 14), (16, 7, 7)]
    assert all(float(a.min()) >= 0 for a in last.aux)
    # first.objective is the data term at x_0 = 0 (the forward states make the other
    # Bregman terms 0); compare the same reduced objective at the result.
    reduced = problem.objective_parts(last.x)["total"]
    assert float(reduced[0]) < float(first.objective[0])
    zeros = metrics.psnr(torch.zeros_like(x_true), x_true)
    assert float(last.psnr[0]) > float(zeros[0])


def test_float32_layerwise_run() -> None:
    net = relu_mlp((36, 72, 108), 0, dtype=torch.float32)
    y = net.forward(disc(6, 2.0, torch.float32).reshape(1, 36))
    problem = InversionProblem(net, y, make_regulariser("tv"), 0.05)
    records = run(problem, "layerwise", stop=StopRule(max_iter=200, tol=0),
                  options={"layer_tikhonov": 0.05}, report_every=50)
    net64 = relu_mlp((36, 72, 108), 0)
    ref = InversionProblem(net64, y.double(), make_regulariser("tv"), 0.05)
    ref_records = run(ref, "layerwise", stop=StopRule(max_iter=200, tol=0),
                      options={"layer_tikhonov": 0.05}, report_every=50)
    assert final(iter(records)).x.dtype == torch.float32
    np.testing.assert_allclose([float(r.objective[0]) for r in records],
                               [float(r.objective[0]) for r in ref_records], rtol=1e-4)
