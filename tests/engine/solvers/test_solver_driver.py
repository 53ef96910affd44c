"""The one run loop (lbi_engine/solvers/driver.py): stop reasons, the fixed point of a toy
method with a closed-form solution, callbacks, warm-start counting, and that every method
of ``solve`` runs through it.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor

from lbi_engine.solvers import CancelToken, StopRule, solve
from lbi_engine.solvers import driver as driver_module
from lbi_engine.solvers import layerwise as layerwise_module
from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.backprop import Backprop
from lbi_engine.solvers.driver import Method, drive, new_monitor
from lbi_engine.solvers.joint.method import CoordinateDescent
from lbi_engine.solvers.landweber import Landweber
from lbi_engine.solvers.layerwise import FeatureStage
from lbi_engine.solvers.one_layer.method import BlockMethod, OneLayer
from tests.engine.solvers.test_solver_protocol import _problem

LAM = 0.5  # ridge weight of the toy problem
STEP = 0.3  # gradient step; the iteration map contracts by |1 - STEP (1 + LAM)| = 0.55
CONTRACTION = abs(1.0 - STEP * (1.0 + LAM))


class Ridge:
    """The least problem RunMonitor needs: E(x) = 1/2 ||x - c||^2 + LAM/2 ||x||^2 per sample,
    minimised at x* = c / (1 + LAM) with E* = LAM / (2 (1 + LAM)) ||c||^2."""

    x_true = None

    def __init__(self, c: Tensor) -> None:
        self.c = c
        self.batch, self.device, self.dtype = c.shape[0], c.device, c.dtype

    def objective_parts(self, x: Tensor, aux: object = None) -> dict[str, Tensor]:
        data = 0.5 * (x - self.c).pow(2).sum(dim=1)
        reg = 0.5 * LAM * x.pow(2).sum(dim=1)
        return {"total": data + reg, "bregman": data[:, None], "reg": reg,
                "discrepancy": (x - self.c).norm(dim=1)}

    @property
    def solution(self) -> Tensor:
        return self.c / (1.0 + LAM)

    @property
    def minimum(self) -> Tensor:
        return LAM / (2.0 * (1.0 + LAM)) * self.c.pow(2).sum(dim=1)


class GradientStep(Method):
    """x <- x - STEP grad E(x), written in place into a second buffer (two slots swapped)."""

    def __init__(self, problem: Ridge, blow_up: bool = False) -> None:
        self.problem = problem
        self.slots = [torch.zeros_like(problem.c), torch.empty_like(problem.c)]
        self.cur = 0
        self.blow_up = blow_up  # sample 1 becomes non-finite at the 5th step

    def state(self) -> tuple[Tensor, list[Tensor]]:
        return self.slots[self.cur], []

    def step(self, monitor: RunMonitor) -> tuple[Tensor, Tensor | None]:
        x, new = self.slots[self.cur], self.slots[1 - self.cur]
        # new = x - STEP ((1 + LAM) x - c)
        torch.add(x, self.problem.c, alpha=STEP, out=new)
        new.sub_(x, alpha=STEP * (1.0 + LAM))
        if self.blow_up and monitor.iteration - monitor.start_iteration == 4:
            new[1] = math.inf
        accepted, change = monitor.accept(new, x)
        if accepted is not new:
            new.copy_(accepted)
        self.cur = 1 - self.cur
        return change, None


def _ridge(batch: int = 2) -> Ridge:
    gen = torch.Generator().manual_seed(0)
    return Ridge(torch.randn(batch, 16, generator=gen, dtype=torch.float64))


def _run(stop: StopRule, *, cancel: CancelToken | None = None, report_every: int = 5,
         init: dict | None = None, method_factory: type = GradientStep, **kwargs: object):
    problem = _ridge()
    monitor = new_monitor(problem, "toy", stop, cancel, report_every, init)
    return problem, list(drive(method_factory(problem, **kwargs), monitor))


def test_the_toy_method_converges_to_its_closed_form_fixed_point() -> None:
    tol = 1e-10
    problem, records = _run(StopRule(max_iter=10_000, tol=tol, tol_mode="relative"))
    last = records[-1]
    assert last.final and last.stop_reasons == ["tolerance", "tolerance"]
    # a contraction with factor q: ||x_k - x*|| <= q / (1 - q) ||x_k - x_{k-1}||
    error = (last.x - problem.solution).norm(dim=1)
    bound = CONTRACTION / (1 - CONTRACTION) * tol * last.x.norm(dim=1)
    assert bool((error <= 1.01 * bound).all())
    # and it needs about log(tol) / log(q) steps, not max_iter
    assert last.iteration <= math.log(tol) / math.log(CONTRACTION) + 10


def test_the_objective_rule_stops_within_tol_of_the_minimum() -> None:
    problem, records = _run(StopRule(max_iter=10_000))  # tol 1e-4 on the objective
    last = records[-1]
    assert last.stop_reasons == ["tolerance", "tolerance"]
    gap = (last.objective - problem.minimum) / problem.minimum
    assert bool((gap >= 0).all()) and bool((gap <= 1e-4).all())


def test_max_iterations_counts_from_a_warm_start() -> None:
    _, records = _run(StopRule(max_iter=17, tol=0), init={"iteration": 40})
    assert records[0].iteration == 40 and not records[0].final
    assert [r.iteration for r in records[1:-1]] == [45, 50, 55]  # every report_every
    assert records[-1].iteration == 57 and records[-1].stop_reasons == ["max_iterations"] * 2


def test_cancel_stops_before_the_next_iteration() -> None:
    problem = _ridge()
    token = CancelToken()
    monitor = new_monitor(problem, "toy", StopRule(max_iter=1000, tol=0), token, 5, None)
    records = []
    for record in drive(GradientStep(problem), monitor):
        records.append(record)
        if record.iteration == 10:
            token.cancel()
    assert records[-1].iteration == 10 and records[-1].stop_reasons == ["cancelled"] * 2


class SlowStep(GradientStep):
    def step(self, monitor: RunMonitor) -> tuple[Tensor, Tensor | None]:
        import time

        time.sleep(0.002)
        return super().step(monitor)


def test_time_budget_stops_the_run() -> None:
    budget = 0.05
    _, records = _run(StopRule(max_iter=10**6, tol=0, time_budget=budget),
                      method_factory=SlowStep)
    last = records[-1]
    assert last.stop_reasons == ["time_budget"] * 2
    assert last.elapsed >= budget and last.iteration < 10**6


def test_a_non_finite_sample_stops_as_diverged_and_keeps_its_last_iterate() -> None:
    _, records = _run(StopRule(max_iter=12, tol=0), blow_up=True)
    last = records[-1]
    assert last.stop_reasons == ["max_iterations", "diverged"]
    assert bool(torch.isfinite(last.x).all())


def test_callbacks_receive_every_record_in_order() -> None:
    problem = _ridge()
    seen: list = []
    monitor = new_monitor(problem, "toy", StopRule(max_iter=23, tol=0), None, 4, None)
    records = list(drive(GradientStep(problem), monitor, callbacks=[seen.append]))
    assert [r.iteration for r in records] == [0, 4, 8, 12, 16, 20, 23]
    assert [id(r) for r in seen] == [id(r) for r in records]


def test_every_ported_method_is_a_driver_method() -> None:
    for cls in (Landweber, Backprop, BlockMethod, OneLayer, CoordinateDescent, FeatureStage):
        assert issubclass(cls, Method)


@pytest.mark.parametrize(("method", "options", "expected"), [
    ("pdhg", {}, {OneLayer}),
    ("pdhg", {"steps": "balanced"}, {OneLayer}),
    ("joint", {"steps": "safe"}, {CoordinateDescent}),
    # the input stage's alpha search solves one-layer problems (method pdhg) itself
    ("layerwise", {}, {FeatureStage, BlockMethod, OneLayer}),
    ("landweber", {}, {Landweber}),
    ("backprop", {}, {Backprop}),
])
def test_solve_runs_each_method_through_the_driver(monkeypatch: pytest.MonkeyPatch, method: str,
                                                    options: dict, expected: set) -> None:
    seen: set = set()
    original = driver_module.iterate

    def spy(m: Method, *args: object, **kwargs: object):
        seen.add(type(m))
        return original(m, *args, **kwargs)

    monkeypatch.setattr(driver_module, "iterate", spy)
    monkeypatch.setattr(layerwise_module, "iterate", spy)
    problem = _problem(method, truth=False)
    records = list(solve(problem, method, stop=StopRule(max_iter=10, tol=0), options=options))
    assert records[-1].final and seen == expected
