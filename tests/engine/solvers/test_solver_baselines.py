"""The baselines: Landweber with the discrepancy principle (MATH.md §6) and gradient descent
through the network (backpropagation), each against an independent NumPy iteration or
finite differences."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lbi_engine.regularisers import make_regulariser
from lbi_engine.solvers import StopRule, final
from lbi_engine.solvers.backprop import smoothed_reg_gradient
from tests.engine._solver_cases import (
    dense,
    diff_matrices,
    disc,
    objectives,
    problem_for,
    relu_mlp,
    relu_perceptron,
    run,
    tv_numpy,
)


def _relu_bregman(y: np.ndarray, z: np.ndarray) -> float:
    """B_ReLU(y, z) = ½||y||^2 + ½||z_+||^2 - <y, z> for y >= 0 (MATH.md §2.3)."""
    zp = np.maximum(z, 0)
    return float(0.5 * y @ y + 0.5 * zp @ zp - y @ z)


@pytest.mark.parametrize("seed", [0, 1])
def test_landweber_is_the_classical_iteration_and_stops_by_discrepancy(seed: int) -> None:
    side, std, eta = 8, 0.05, 1.05
    net = relu_perceptron(side, 96, seed)
    problem = problem_for(net, disc(side, 2.5).reshape(1, -1), 0.01, std=std, seed=seed)
    records = run(problem, "landweber", stop=StopRule(max_iter=500), report_every=1)
    last = records[-1]
    assert last.stop_reasons == ["discrepancy"]
    assert 2 <= last.iteration <= 60

    # Independent Landweber: x <- x - tau A^T(relu(A x + b) - y), tau = 1/||A||_2^2, x^0 = 0,
    # stopped at the first k with ||relu(A x^k + b) - y|| <= eta delta.
    a, b = dense(net.layers[0].affine)
    y = problem.y_delta[0].numpy()
    delta = float(problem.delta[0])
    assert delta == pytest.approx(float(np.linalg.norm(y - net.forward(problem.x_true)[0].numpy())))
    tau = 1.0 / np.linalg.norm(a, 2) ** 2
    assert last.extras["tau"] == pytest.approx(tau, rel=1e-10)
    x, k = np.zeros(a.shape[1]), 0
    while np.linalg.norm(np.maximum(a @ x + b, 0) - y) > eta * delta:
        x = x - tau * a.T @ (np.maximum(a @ x + b, 0) - y)
        k += 1
    assert last.iteration == k
    np.testing.assert_allclose(last.x[0].numpy(), x, rtol=0, atol=1e-12 * abs(x).max())
    by_iteration = {r.iteration: float(r.discrepancy[0]) for r in records}
    assert sorted(by_iteration) == list(range(k + 1))
    assert by_iteration[k] <= eta * delta < min(by_iteration[i] for i in range(k))
    # The reported objective is the problem's: B(y, A x + b) + alpha TV(x).
    expected = _relu_bregman(y, a @ x + b) + 0.01 * tv_numpy(x, side, side)
    assert float(last.objective[0]) == pytest.approx(expected, rel=1e-10)


def test_landweber_without_delta_runs_to_the_cap() -> None:
    net = relu_perceptron(6, 40, 0)
    problem = problem_for(net, disc(6, 2.0).reshape(1, -1), 0.01, std=0.02)
    problem.delta = None
    last = final(run(problem, "landweber", stop=StopRule(max_iter=30, tol=0)))
    assert last.stop_reasons == ["max_iterations"] and last.iteration == 30


def test_multilayer_landweber_step_is_the_gradient_of_the_last_bregman_term() -> None:
    """x^1 = x^0 - tau grad_x B_L(y, z_L(x)) with grad = J^T(sigma_L(z_L) - y) (MATH.md
    §1.2 fact 4), checked by central differences of the closed-form B_ReLU."""
    net = relu_mlp((16, 24, 20), 2)
    problem = problem_for(net, disc(4, 1.2).reshape(1, 16), 0.01, std=0.05)
    start = 0.3 * torch.randn(1, 16, generator=torch.Generator().manual_seed(5),
                              dtype=torch.float64)
    records = run(problem, "landweber", stop=StopRule(max_iter=1, tol=0),
                  init={"x": start}, report_every=1)
    tau = records[-1].extras["tau"]
    norms = [np.linalg.norm(dense(layer.affine)[0], 2) ** 2 for layer in net.layers]
    assert tau == pytest.approx(1.0 / np.prod(norms), rel=1e-9)
    step = (start - records[-1].x)[0].numpy() / tau

    (a1, b1), (a2, b2) = (dense(layer.affine) for layer in net.layers)
    y = problem.y_delta[0].numpy()

    def data_term(x: np.ndarray) -> float:
        return _relu_bregman(y, a2 @ np.maximum(a1 @ x + b1, 0) + b2)

    x0, h = start[0].numpy(), 1e-6
    fd = np.array([(data_term(x0 + h * e) - data_term(x0 - h * e)) / (2 * h)
                   for e in np.eye(16)])
    np.testing.assert_allclose(step, fd, rtol=0, atol=1e-7 * abs(fd).max())


def test_backprop_gradient_descent_is_the_projected_gradient_iteration() -> None:
    """optimizer='gd', Tikhonov prior (no dual part): x <- prox_{lr alpha g}(x - lr grad),
    grad = A^T((relu(Ax+b) - y) * 1[Ax+b > 0]), prox = 1/(1 + lr alpha)."""
    side, alpha, lr = 6, 0.1, 0.2
    net = relu_perceptron(side, 40, 0)
    problem = problem_for(net, disc(side, 2.0).reshape(1, -1), alpha, std=0.02,
                          reg="tikhonov")
    last = final(run(problem, "backprop", stop=StopRule(max_iter=50, tol=0),
                     options={"optimizer": "gd", "lr": lr}, report_every=10))
    a, b = dense(net.layers[0].affine)
    y = problem.y_delta[0].numpy()
    x = np.zeros(a.shape[1])
    for _ in range(50):
        z = a @ x + b
        x = (x - lr * a.T @ ((np.maximum(z, 0) - y) * (z > 0))) / (1 + lr * alpha)
    np.testing.assert_allclose(last.x[0].numpy(), x, rtol=0, atol=1e-12)


def test_huber_tv_gradient_is_the_gradient_of_the_moreau_envelope() -> None:
    """alpha * sum_ij huber_eps(|grad x|_ij), huber(t) = t^2/(2 eps) (t <= eps), t - eps/2."""
    side, alpha, eps = 6, 0.3, 0.05
    rng = np.random.default_rng(0)
    x = rng.standard_normal((side, side)) * 0.1
    x[:3] += 1.0  # flat and steep regions: both branches of the Huber function
    dh, dw = diff_matrices(side, side)

    def envelope(v: np.ndarray) -> float:
        t = np.sqrt((dh @ v) ** 2 + (dw @ v) ** 2)
        return alpha * float(np.where(t <= eps, t**2 / (2 * eps), t - eps / 2).sum())

    reg = make_regulariser("tv")
    got = smoothed_reg_gradient(reg, torch.tensor(x).reshape(1, 1, side, side), alpha, eps)
    h = 1e-7
    flat = x.reshape(-1)
    fd = np.array([(envelope(flat + h * e) - envelope(flat - h * e)) / (2 * h)
                   for e in np.eye(side * side)])
    np.testing.assert_allclose(got.reshape(-1).numpy(), fd, rtol=0, atol=1e-6)


@pytest.mark.parametrize("optimizer, lr", [("adam", 2e-2), ("gd", 0.5)])
def test_backprop_reduces_the_objective_on_a_two_layer_net(optimizer: str, lr: float) -> None:
    net = relu_mlp((36, 60, 80), 0)
    problem = problem_for(net, disc(6, 2.0).reshape(1, 36), 0.02, std=0.01)
    records = run(problem, "backprop", stop=StopRule(max_iter=300, tol=0),
                  options={"optimizer": optimizer, "lr": lr}, report_every=20)
    curve = objectives(records)
    assert records[-1].stop_reasons == ["max_iterations"]
    assert curve[-1] < 0.2 * curve[0]
    assert float(records[-1].psnr[0]) > float(records[0].psnr[0])
    assert records[-1].aux == []


def test_float32_baselines() -> None:
    net = relu_perceptron(8, 96, 0)
    x_true = disc(8, 2.5).reshape(1, -1)
    ref = final(run(problem_for(net, x_true, 0.01, std=0.05), "landweber",
                    stop=StopRule(max_iter=500)))
    problem = problem_for(net.to(dtype=torch.float32), x_true.float(), 0.01, std=0.05)
    assert problem.y_delta.dtype == torch.float32
    landweber = final(run(problem, "landweber", stop=StopRule(max_iter=500)))
    assert landweber.stop_reasons == ["discrepancy"] and landweber.x.dtype == torch.float32
    assert landweber.iteration == ref.iteration
    np.testing.assert_allclose(landweber.x.double().numpy(), ref.x.numpy(), atol=1e-5)
    backprop = run(problem, "backprop", stop=StopRule(max_iter=100, tol=0), report_every=50)
    assert backprop[-1].x.dtype == torch.float32
    assert float(backprop[-1].objective[0]) < float(backprop[0].objective[0])


def test_backprop_stops_by_tolerance_at_the_default_stop_rule() -> None:
    """Adam with a fixed step jittered around its minimum and ran every benchmark run to the
    10,000 cap; with the plateau schedule its objective settles and the default rule fires."""
    import numpy as np
    import torch

    from lbi_engine import data, noise
    from lbi_engine.models.zoo import load_network
    from lbi_engine.problem import InversionProblem
    from lbi_engine.regularisers import make_regulariser
    from lbi_engine.solvers import StopRule, final, solve

    bundle = load_network("mnist-perceptron-ae")
    enc = bundle.encoder.to(dtype=torch.float32)
    x = torch.as_tensor(np.asarray(bundle.preprocessing.apply(
        np.asarray(data.get_sample("mnist", "val", 150)).reshape(1, *enc.input_shape))),
        dtype=torch.float32)
    y = noise.make_noisy_data(enc, x, 0.05, seed=0).y_delta
    problem = InversionProblem(enc, y, make_regulariser("tv"), 0.03, x_true=x)
    last = final(solve(problem, "backprop", stop=StopRule(max_iter=10_000)))
    assert last.stop_reasons == ["tolerance"] and last.iteration < 10_000
    # it ends near the lifted methods' answer (a different, smoothed objective: PSNR, not x)
    joint = final(solve(problem, "joint", stop=StopRule(max_iter=10_000)))
    assert abs(float(last.psnr[0]) - float(joint.psnr[0])) < 0.5
