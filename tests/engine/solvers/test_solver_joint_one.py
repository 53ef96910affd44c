"""The joint method's one-sample path (``_joint_one``): gradient and records on buffers.

* its gradient is the general path's (``JointFista.gradient``), with biases on every layer,
  in float64 to rounding and in float32 to float32 rounding;
* the records' objective it computes is the problem's (``problem.objective_parts``);
* it declines what it does not handle (a batch, an activation without an in-place sigma);
* a run under the objective rule, which then skips the per-step norms, still stops a
  diverging sample as diverged with its last finite iterate, and its records still carry
  the last step's relative change.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lbi_engine.solvers import StopRule, final, solve
from lbi_engine.solvers.joint.fista import JointFista
from tests.engine._nets import lift
from tests.engine._solver_cases import disc, problem_for


def _biased_cnn(dtype: torch.dtype, last: nn.Module | None = None) -> object:
    """Two strided convolutions and a linear layer, all with nonzero biases."""
    torch.manual_seed(5)
    layers = [nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.ReLU(),
              nn.Conv2d(4, 6, 3, stride=2, padding=1), nn.ReLU(),
              nn.Flatten(), nn.Linear(6 * 4 * 4, 20)]
    if last is not None:
        layers.append(last)
    module = nn.Sequential(*layers)
    with torch.no_grad():
        for m in module:
            if getattr(m, "bias", None) is not None:
                m.bias.uniform_(-0.3, 0.3)
    net = lift(module, (1, 14, 14), dtype)
    x_true = disc(14, 4.0, dtype).reshape(1, 1, 14, 14)
    return problem_for(net, x_true, 1e-2, std=0.01)


def _state(problem: object) -> JointFista:
    torch.manual_seed(1)
    x = torch.rand_like(problem.zeros_input())
    aux = [a.clamp_min(0) + 0.1 * torch.rand_like(a) for a in problem.forward_aux(x)]
    return JointFista(problem, [x, *aux], None, 1.0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_one_sample_gradient_is_the_general_one(dtype: torch.dtype) -> None:
    state = _state(_biased_cnn(dtype))
    assert state.one is not None  # the path under test is the one a run takes
    torch.manual_seed(2)
    for block in state.ys:  # a point away from the start, aux blocks of both signs
        block.add_(0.2 * torch.randn_like(block))
    general = state.gradient(state.ys)
    state.one(state.y_flat, state.grad_flat)
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    for mine, theirs in zip(state.grad_views, general, strict=True):
        scale = float(theirs.abs().max())
        assert scale > 0
        torch.testing.assert_close(mine, theirs, rtol=0, atol=tol * scale)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_one_sample_objective_is_the_problems(dtype: torch.dtype) -> None:
    problem = _biased_cnn(dtype)
    state = _state(problem)
    mine = state.objective_parts()
    theirs = problem.objective_parts(state.xs[0], state.xs[1:])
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    for key in ("bregman", "reg", "total", "discrepancy"):
        assert mine[key].shape == theirs[key].shape
        torch.testing.assert_close(mine[key], theirs[key], rtol=tol, atol=tol)


def test_the_one_sample_path_declines_what_it_does_not_handle() -> None:
    assert _state(_biased_cnn(torch.float64, last=nn.Sigmoid())).one is None
    problem = _biased_cnn(torch.float64)
    two = problem_for(problem.network, torch.cat([problem.x_true, 0.5 * problem.x_true]),
                      1e-2, std=0.01)
    assert _state(two).one is None


def test_a_diverging_one_sample_run_stops_as_diverged_with_a_finite_iterate() -> None:
    problem = _biased_cnn(torch.float64)
    records = list(solve(problem, "joint", options={"step_scale": 50.0},
                         stop=StopRule(max_iter=3000, tol=1e-4, tol_mode="objective"),
                         report_every=5))
    last = final(records)
    assert last.stop_reasons == ["diverged"]
    assert bool(torch.isfinite(last.x).all())
    assert last.iteration < 3000


def test_records_carry_the_last_steps_change_under_the_objective_rule() -> None:
    problem = _biased_cnn(torch.float64)
    records = list(solve(problem, "joint", stop=StopRule(max_iter=40, tol=0,
                                                       tol_mode="objective"),
                         report_every=1))
    steps = [r for r in records if not r.final and r.iteration > 0]
    for before, after in zip(steps, steps[1:], strict=False):
        change = float((after.x - before.x).norm() / after.x.norm())
        if after.aux:
            flat_new = torch.cat([after.x.reshape(-1), *[a.reshape(-1) for a in after.aux]])
            flat_old = torch.cat([before.x.reshape(-1), *[a.reshape(-1) for a in before.aux]])
            change = float((flat_new - flat_old).norm() / flat_new.norm())
        assert math.isclose(float(after.primal_residual[0]), change, rel_tol=1e-9)


def _numba() -> bool:
    from lbi_engine.regularisers import TVProx

    return TVProx.compiles_on("cpu")


needs_numba = pytest.mark.skipif(not _numba(), reason="the compiled step needs numba "
                                 "(LBI_NO_NUMBA is set or numba does not import)")


@needs_numba
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_compiled_step_takes_the_torch_steps(dtype: torch.dtype) -> None:
    """step_one (gradient on buffers, the rest compiled) against step() + accept_one() (torch)
    from the same state: the same iterates to rounding over 120 steps, restarts included."""
    problem = _biased_cnn(dtype)
    fused, plain = _state(problem), _state(problem)
    assert fused._fused is not None
    plain._fused = None  # step_one falls back to step() + accept_one()
    for _ in range(120):
        assert fused.step_one() and plain.step_one()
    tol = 1e-10 if dtype == torch.float64 else 2e-4
    scale = float(plain.x_flat.abs().max())
    torch.testing.assert_close(fused.x_flat, plain.x_flat, rtol=0, atol=tol * scale)
    assert fused.restarts == plain.restarts
    assert fused.momentum.t == pytest.approx(plain.momentum.t, rel=1e-6)


@needs_numba
def test_the_compiled_step_refuses_a_non_finite_step() -> None:
    state = _state(_biased_cnn(torch.float64))
    assert state._fused is not None
    before = state.x_flat.clone()
    state.y[0, 0] = math.inf  # the next step from here is not finite
    assert not state.step_one()
    torch.testing.assert_close(state.x_flat, before, rtol=0, atol=0)


@needs_numba
def test_the_compiled_step_keeps_the_iterates_pre_activations() -> None:
    """The compiled step takes its products with W at the iterates and forms z at the
    extrapolated point by linearity: after steps with restarts and momentum, the kept
    W_l x_l + b_l of the current and the previous iterate are recomputed ones, and the z
    it formed for the last y is W_l y_l + b_l, to rounding."""
    state = _state(_biased_cnn(torch.float64))
    for _ in range(60):
        assert state.step_one()
    fresh = [torch.empty_like(z) for z in state.zy_views]
    for slot in (state.slot_x, state.slot_prev):
        state.one.forward_into(state.slot_flat[slot], fresh)
        for kept, recomputed in zip(state.zx_views[slot], fresh, strict=True):
            torch.testing.assert_close(kept, recomputed, rtol=0, atol=1e-12)
    assert state.momentum.coef != 0.0  # the momentum is on: the next z at y is a combination
    state.one.forward_into([part.clone() for part in state.y_flat], fresh)  # W y + b
    state.step_one()  # forms z at the current y first
    for formed, direct in zip(state.zy_views, fresh, strict=True):
        torch.testing.assert_close(formed, direct, rtol=0, atol=1e-12 * float(direct.abs().max()))
