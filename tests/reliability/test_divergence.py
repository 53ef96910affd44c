"""Absurd step sizes make every method blow up; each must stop with "diverged" and keep the
last finite iterate (never hand NaN or Inf to the GUI, the CLI or a file)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lbi_engine.models.network import LiftedNetwork
from lbi_engine.noise import make_noisy_data
from lbi_engine.priors.feature import fit_feature_priors
from lbi_engine.problem import InversionProblem
from lbi_engine.regularisers import make_regulariser
from lbi_engine.solvers import METHODS, StopRule, solve


def _problem(depth: int, dtype: torch.dtype = torch.float32) -> InversionProblem:
    """Leaky-ReLU layers: nothing saturates, so too large steps really blow up."""
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Flatten(), nn.Linear(64, 20), nn.LeakyReLU(0.2)]
    if depth == 2:
        layers += [nn.Linear(20, 10), nn.LeakyReLU(0.2)]
    net = LiftedNetwork.from_module(nn.Sequential(*layers).to(dtype).eval(), (1, 8, 8))
    x_true = torch.rand(2, 1, 8, 8, dtype=dtype)
    noisy = make_noisy_data(net, x_true, 0.05, seed=0)
    # Layer-wise inversion of two layers needs a learned prior on the hidden features.
    priors = fit_feature_priors(net, torch.rand(64, 1, 8, 8, dtype=dtype)) if depth == 2 else None
    return InversionProblem(net, noisy.y_delta, make_regulariser("tv"), 1e-2, x_true=x_true,
                            delta=noisy.noise_norm, feature_priors=priors)


ONE_LAYER = {"pdhg", "one-layer"}  # invert a single layer only
CASES = [(m, 1) for m in METHODS] + [(m, 2) for m in METHODS if m not in ONE_LAYER]


@pytest.mark.parametrize("step_scale", [1e6, 1e30])
@pytest.mark.parametrize(("method", "depth"), CASES, ids=[f"{m}-L{d}" for m, d in CASES])
def test_absurd_steps_stop_as_diverged_with_a_finite_iterate(method: str, depth: int,
                                                             step_scale: float) -> None:
    problem = _problem(depth)
    options = {"step_scale": step_scale}
    if method == "backprop" and depth == 2:
        # Adam moves each entry by at most ~lr per step, so with a huge lr the objective only
        # grows polynomially; plain gradient descent is the method whose steps explode.
        options["optimizer"] = "gd"
    records = list(solve(problem, method, stop=StopRule(max_iter=200), options=options,
                         report_every=1))
    final = records[-1]
    assert final.final
    assert final.stop_reasons == ["diverged", "diverged"], final.stop_reasons
    assert final.iteration < 200  # caught at once, not after the iteration cap
    for rec in records:  # no record ever carries NaN/Inf iterates
        assert torch.isfinite(rec.x).all(), rec.iteration
        assert all(torch.isfinite(a).all() for a in rec.aux), rec.iteration
    # the result is the last finite iterate: the one reported just before, or the one the
    # blow-up step produced in the blocks that stayed finite (others keep their old value)
    assert final.iteration - records[-2].iteration <= 1
    if final.iteration == records[-2].iteration:
        assert torch.equal(final.x, records[-2].x)


def test_divergence_of_one_sample_does_not_stop_the_others() -> None:
    """Per-sample stopping: a sample whose data is absurd diverges alone."""
    problem = _problem(1, torch.float64)
    y = problem.y_delta.clone()
    y[1] *= 1e12  # an absurd measurement for sample 1 only
    problem = InversionProblem(problem.network, y, problem.regulariser, problem.alpha,
                               x_true=problem.x_true)
    records = list(solve(problem, "pdhg", stop=StopRule(max_iter=50, tol=0.0),
                         options={"step_scale": 1.0}, report_every=5))
    final = records[-1]
    assert final.stop_reasons[0] == "max_iterations"
    assert torch.isfinite(final.x).all()
