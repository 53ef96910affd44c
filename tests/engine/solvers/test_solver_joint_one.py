"""The joint method's one-sample strategies (``steps``, ``compiled_step``): gradient and
records on buffers, the step in torch or compiled.

* its gradient is the general path's (``JointFista.gradient``), with biases on every layer,
  in float64 to rounding and in float32 to float32 rounding;
* the records' objective it computes is the problem's (``problem.objective_parts``);
* it declines what it does not handle (a batch, an activation without an in-place sigma);
* a run under the objective rule, which then skips the per-step norms, still stops a
  diverging sample as diverged with its last finite iterate, and its records still carry
  the last step's relative change;
* the strategy follows the state and the stop rule: one sample under the objective rule
  steps on buffers (compiled where numba is), else torch on the batch; and one sample under
  the relative rule takes the batch's steps.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch import nn

from lbi_engine.solvers import StopRule, final, solve
from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.joint.fista import JointFista
from lbi_engine.solvers.joint.steps import BatchStep, OneSampleStep
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


def _state(problem: object, **how: object) -> JointFista:
    torch.manual_seed(1)
    x = torch.rand_like(problem.zeros_input())
    aux = [a.clamp_min(0) + 0.1 * torch.rand_like(a) for a in problem.forward_aux(x)]
    return JointFista(problem, [x, *aux], **how)


def _steps(state: JointFista, count: int) -> None:
    monitor = RunMonitor(state.problem, "joint", StopRule(max_iter=count), None, 10**9)
    for _ in range(count):
        state.step(monitor)
    assert bool(monitor.active.all())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_one_sample_gradient_is_the_general_one(dtype: torch.dtype) -> None:
    state = _state(_biased_cnn(dtype))
    assert state.one is not None  # the path under test is the one a run takes
    torch.manual_seed(2)
    for block in state.y_views:  # a point away from the start, aux blocks of both signs
        block.add_(0.2 * torch.randn_like(block))
    general = state.gradient(state.y_views)
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
    """The compiled step (gradient on buffers, the rest compiled) against the one-sample
    step in torch from the same state: the same iterates to rounding over 120 steps,
    restarts included."""
    problem = _biased_cnn(dtype)
    fused, plain = _state(problem), _state(problem, compiled=False)
    assert type(fused.stepper).__name__ == "CompiledStep"
    assert type(plain.stepper) is OneSampleStep
    for _ in range(120):
        assert fused.stepper.advance(fused) and plain.stepper.advance(plain)
    tol = 1e-10 if dtype == torch.float64 else 2e-4
    scale = float(plain.x_flat.abs().max())
    torch.testing.assert_close(fused.x_flat, plain.x_flat, rtol=0, atol=tol * scale)
    assert fused.restarts == plain.restarts
    assert fused.momentum.t == pytest.approx(plain.momentum.t, rel=1e-6)


@needs_numba
def test_the_compiled_step_refuses_a_non_finite_step() -> None:
    state = _state(_biased_cnn(torch.float64))
    assert type(state.stepper).__name__ == "CompiledStep"
    before = state.x_flat.clone()
    state.y[0, 0] = math.inf  # the next step from here is not finite
    monitor = RunMonitor(state.problem, "joint", StopRule(), None, 10**9)
    state.step(monitor)
    assert monitor.reasons == ["diverged"] and not bool(monitor.active.any())
    torch.testing.assert_close(state.x_flat, before, rtol=0, atol=0)


@needs_numba
def test_the_compiled_step_keeps_the_iterates_pre_activations() -> None:
    """The compiled step takes its products with W at the iterates and forms z at the
    extrapolated point by linearity: after steps with restarts and momentum, the kept
    W_l x_l + b_l of the current and the previous iterate are recomputed ones, and the z
    it formed for the last y is W_l y_l + b_l, to rounding."""
    state = _state(_biased_cnn(torch.float64))
    compiled = state.stepper
    _steps(state, 60)
    fresh = [torch.empty_like(z) for z in compiled.zy_views]
    for slot in (state.slot_x, state.slot_prev):
        state.one.forward_into(state.slot_flat[slot], fresh)
        kept_now = state.pre_activations if slot == state.slot_x else compiled.zx_views[slot]
        for kept, recomputed in zip(kept_now, fresh, strict=True):
            torch.testing.assert_close(kept, recomputed, rtol=0, atol=1e-12)
    assert state.momentum.coef != 0.0  # the momentum is on: the next z at y is a combination
    state.one.forward_into([part.clone() for part in state.y_flat], fresh)  # W y + b
    _steps(state, 1)  # forms z at the current y first
    for formed, direct in zip(compiled.zy_views, fresh, strict=True):
        torch.testing.assert_close(formed, direct, rtol=0, atol=1e-12 * float(direct.abs().max()))


def test_the_strategy_follows_the_samples_and_the_stop_rule() -> None:
    """Chosen once, at construction: one sample under the objective rule on buffers (compiled
    where numba is, torch when told not to), a batch or another rule torch on the batch."""
    problem = _biased_cnn(torch.float64)
    assert type(_state(problem, compiled=False).stepper) is OneSampleStep
    assert type(_state(problem, tol_mode="relative").stepper) is BatchStep
    two = problem_for(problem.network, torch.cat([problem.x_true, 0.5 * problem.x_true]),
                      1e-2, std=0.01)
    assert type(_state(two).stepper) is BatchStep
    assert not _state(problem, compiled=False).measures_change
    assert _state(two).measures_change


def test_one_sample_under_the_relative_rule_takes_the_batchs_steps() -> None:
    """A sample alone under the relative rule steps as the first row of a batch of two
    (whose strategy is torch on the batch): the same iterates to rounding over 60 steps.
    (This once stopped as diverged where numba was: its records read pre-activations
    that only the compiled step keeps up to date.)"""
    problem = _biased_cnn(torch.float64)
    two = problem_for(problem.network, torch.cat([problem.x_true, 0.5 * problem.x_true]),
                      1e-2, std=0.01)
    two = dataclasses.replace(two, y_delta=torch.cat([problem.y_delta, two.y_delta[1:]]))
    stop = StopRule(max_iter=60, tol=0.0, tol_mode="relative")
    alone = final(solve(problem, "joint", stop=stop, report_every=20))
    both = final(solve(two, "joint", stop=stop, report_every=20))
    assert alone.stop_reasons == ["max_iterations"]
    torch.testing.assert_close(alone.x[0], both.x[0], rtol=0, atol=1e-10)
    torch.testing.assert_close(alone.objective[0], both.objective[0], rtol=1e-10, atol=0)
