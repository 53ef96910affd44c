"""The α-search machinery both rule families share (lbi_engine/solvers/alpha/path.py), each
piece against an independent computation: brute-force minima, the closed form of a power law,
numpy norms, and a budget counted by hand."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch

from lbi_engine.solvers.alpha.path import (
    Budget,
    Minimum,
    OutOfBudget,
    QuasiOptimality,
    at_first_local_minimum,
    discrepancy_ratio,
    drain,
    geometric,
    log_linear,
    quasi_minimum,
    quasi_optimality,
    quasi_optimality_walk,
)


def test_geometric_walks_down_to_the_lowest_alpha_inclusive() -> None:
    alphas = list(geometric(1.0, 10.0 ** -0.25, 1e-2, 1e3))
    assert len(alphas) == 9  # 1, 10^-0.25, .., 10^-2: the end survives its rounding
    np.testing.assert_allclose(alphas, 10.0 ** (-0.25 * np.arange(9)), rtol=1e-12)
    assert list(geometric(2e3, 0.5, 1e-2, 1e3)) == []  # a start above the range walks nowhere


def test_quasi_optimality_is_the_neighbour_distance() -> None:
    gen = torch.Generator().manual_seed(0)
    xs = [torch.randn(2, 3, generator=gen, dtype=torch.float32) for _ in range(4)]
    want = [float(np.linalg.norm(xs[k + 1].double().numpy() - xs[k].double().numpy()))
            for k in range(3)]
    assert quasi_optimality(xs) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize(("steps", "global_k", "local_k"), [
    ([5.0, 3.0, 4.0, 1.0], 3, 1),      # a first local minimum before the global one
    ([5.0, 4.0, 3.0, 2.0], 3, 3),      # falling all the way: the last step
    ([2.0, 2.0, 1.0], 2, 0),           # a tie counts as a local minimum
    ([1.0, 3.0, 1.0], 0, 0),           # the global minimum's first occurrence
    ([7.0], 0, 0),
])
def test_quasi_minimum_against_brute_force(steps: list[float], global_k: int,
                                           local_k: int) -> None:
    assert quasi_minimum(steps, "global") == global_k == int(np.argmin(steps))
    first_local = next((k for k in range(len(steps) - 1) if steps[k] <= steps[k + 1]),
                       len(steps) - 1)
    assert quasi_minimum(steps, "first-local") == local_k == first_local
    assert at_first_local_minimum(steps[:local_k + 2]) == (local_k + 1 < len(steps))


def test_log_linear_is_exact_on_a_power_law_and_on_a_log_law() -> None:
    # residual = c alpha^p: linear in (log alpha, log residual), so the interpolation is exact
    c, p = 3.0, 0.4
    lo, hi = (1e-3, c * 1e-3 ** p), (1e-1, c * 1e-1 ** p)
    target = c * 0.02 ** p
    assert log_linear(lo, hi, target, log_values=True, flat=0.5) == pytest.approx(0.02,
                                                                                 rel=1e-12)
    # ratio = a + b log alpha: linear in (log alpha, ratio)
    a, b = 2.0, 0.3
    lo, hi = (0.01, a + b * math.log(0.01)), (0.3, a + b * math.log(0.3))
    assert log_linear(lo, hi, a + b * math.log(0.05), log_values=False,
                      flat=0.0) == pytest.approx(0.05, rel=1e-12)
    # flat between the ends: the given fraction of the way, in log alpha
    assert log_linear((0.01, 1.0), (1.0, 1.0), 1.0, log_values=False,
                      flat=0.5) == pytest.approx(0.1, rel=1e-12)


def test_discrepancy_ratio_per_sample_and_as_number() -> None:
    assert discrepancy_ratio(3.0, 2.0) == 1.5
    got = discrepancy_ratio(torch.tensor([1.0, 4.0]), torch.tensor([2.0, 2.0]))
    assert got.tolist() == [0.5, 2.0]


def test_budget_caps_each_solve_and_runs_out() -> None:
    budget = Budget(iterations=250, per_solve=120)
    assert budget.cap() == (120, None)
    budget.spend(120)
    budget.spend(100)
    assert budget.cap() == (30, None) and budget.used == 220
    budget.spend(30)
    with pytest.raises(OutOfBudget):
        budget.cap()
    timed = Budget(iterations=10, per_solve=5, seconds=1e-9, started=time.perf_counter() - 1)
    with pytest.raises(OutOfBudget):
        timed.cap()


def _scalar_path(values: dict[float, float], stop_at: float | None = None):
    """solve_at over iterates x(alpha) = values[alpha] (a 1-vector); records the alphas asked."""
    asked: list[float] = []

    def solve_at(alpha: float):
        asked.append(alpha)
        yield alpha  # the streamed "record"
        key = min(values, key=lambda a: abs(math.log(a / alpha)))
        return torch.tensor([values[key]]), key == stop_at
    return solve_at, asked


@pytest.mark.parametrize(("minimum", "solves", "k"), [("global", 6, 3), ("first-local", 3, 0)])
def test_the_walk_reads_its_minimum_and_a_first_local_rule_stops_there(
        minimum: Minimum, solves: int, k: int) -> None:
    # steps between neighbours 1, 3, 2 | 0.5, 4: first local minimum at k 0, global at k 3
    alphas = [8.0, 4.0, 2.0, 1.0, 0.5, 0.25]
    xs = np.cumsum([0.0, 1.0, 3.0, 2.0, 0.5, 4.0])
    solve_at, asked = _scalar_path(dict(zip(alphas, xs, strict=True)))
    rule = QuasiOptimality(8.0, 0.5, 0.25, 10.0, minimum)
    streamed = list(quasi_optimality_walk(rule, solve_at))
    assert asked == alphas[:solves] and streamed == asked
    walked, chosen = drain(quasi_optimality_walk(rule, _scalar_path(
        dict(zip(alphas, xs, strict=True)))[0]))
    assert walked == alphas[:solves] and chosen == k


def test_a_solve_that_must_stop_ends_the_walk_without_a_choice() -> None:
    solve_at, asked = _scalar_path({1.0: 0.0, 0.5: 1.0, 0.25: 3.0}, stop_at=0.5)
    walked, chosen = drain(quasi_optimality_walk(
        QuasiOptimality(1.0, 0.5, 0.1, 1.0, "global"), solve_at))
    assert walked == asked == [1.0, 0.5] and chosen is None
