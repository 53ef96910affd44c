"""alpha of the input stage of the layer-wise method, when the noise level is known: its own
rules over ``path.py``'s walk, quasi-optimality function, interpolation, ratio and budget.

The input stage solves min_x B_{Psi_1}(x_1^est, W_1 x + b_1) + alpha R(x) with data x_1^est,
the features the earlier stages estimated. Two rules (``SolverOptions.input_alpha``):

``quasi-optimality`` (default): solves on a geometric search (factor 3) from
alpha = 0.9 down, each warm-started from the previous one, until the quasi-optimality
function ||x_k - x_{k+1}|| between neighbours has its first local minimum; alpha is the
geometric mean of that pair (the step measures the middle of its interval). The first local
minimum, not the global one: the capped solves at small alpha move little, which makes
spurious small steps there (Raus & Haemarik 2018: the global minimiser of the
quasi-optimality function can fail, one of its local minimisers is good).

Why not the discrepancy principle on the code: its premise, that the residual of a good
alpha is the noise, fails here. The residual ||f(x_alpha) - y_delta|| also carries the earlier
stages' error, which at low noise is as large as the noise or larger, so the alpha that meets
eta delta fits that error. ``python -m benchmarks.studies.bench_layerwise_alpha`` measures both
rules against a grid of input-stage alphas on ``mnist-cnn-ae`` (validation digits; the rule
was designed on training digits 800 and 2400; numbers in docs/LAYERWISE.md).

``discrepancy``: the largest alpha with

    mean_i ||f(x_alpha)_i - y_delta_i|| / delta_i  <=  eta           (Morozov)

found by a geometric search (factor 3) from alpha = 0.1, then one log-linear interpolation
between the bracketing values. When the chain cannot reproduce the code to eta delta at any
alpha, the ratio saturates as alpha decreases; the search stops at the saturation (less than
``SATURATION`` relative decrease per factor 3), adds two alphas above its start and falls back
to quasi-optimality among the alphas tried.

Every solve is the ``pdhg`` method on the one-layer sub-problem (its accelerated default where
it applies), capped at ``SEARCH_ITER`` iterations. The search uses at most ``budget``
iterations in all.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from typing import cast

import torch
from torch import Tensor

from lbi_engine.protocols import Problem
from lbi_engine.settings.solver import SolverOptions
from lbi_engine.solvers.alpha.path import (
    Budget,
    OutOfBudget,
    QuasiOptimality,
    discrepancy_ratio,
    drain,
    log_linear,
    quasi_minimum,
    quasi_optimality,
    quasi_optimality_walk,
    residual_norms,
)
from lbi_engine.solvers.base import CancelToken, StopReason, StopRule, final

START, FACTOR, LOWEST, HIGHEST = 0.1, 3.0, 1e-6, 1e4
SEARCH_ITER = 120
SATURATION = 0.03
#: Quasi-optimality on the input stage: the first local minimum on a factor-3 path from
#: 9 START down to LOWEST.
QUASI = QuasiOptimality(START * FACTOR * FACTOR, 1 / FACTOR, LOWEST, HIGHEST, "first-local")


@dataclass
class AlphaSearch:
    alpha: float
    x: Tensor
    dual: Tensor | None
    iterations: int
    trail: list[tuple[float, float]] = field(default_factory=list)  # (alpha, ratio)
    cancelled: bool = False
    exhausted: bool = False  # the iteration or time budget ended the search
    saturated: bool = False  # eta delta was out of reach; see the module docstring


def sub_problem(problem: Problem, data: Tensor, alpha: float) -> Problem:
    """The input stage as a one-layer problem with data x_1^est."""
    from lbi_engine.models.network import LiftedLayer, LiftedNetwork
    from lbi_engine.problem import InversionProblem

    # the problem's network is a LiftedNetwork (the one Network there is): its layers are
    # LiftedLayers, which the Layer protocol does not promise
    layer = cast("LiftedLayer", problem.network.layers[0])
    first = LiftedNetwork([layer], problem.input_shape, name="layer 1")
    return InversionProblem(network=first, y_delta=data, regulariser=problem.regulariser,
                            alpha=alpha, image_shape=problem.image_shape)


def search_alpha(problem: Problem, data: Tensor, delta: Tensor, eta: float,
                 options: SolverOptions,
                 x0: Tensor, tol: float, cancel: CancelToken | None, budget: int,
                 time_budget: float | None = None, rule: str = "quasi-optimality"
                 ) -> AlphaSearch:
    from lbi_engine.solvers.one_layer.method import run_pdhg

    state: dict[str, Tensor | None] = {"x": x0, "dual": None}
    spent = Budget(budget, SEARCH_ITER, time_budget)
    trail: list[tuple[float, float]] = []
    results: dict[float, tuple[float, Tensor, Tensor | None]] = {}

    def ratio(alpha: float) -> float:
        """A warm solve at ``alpha`` (from the last one's iterate and dual) under the budget;
        its mean discrepancy ratio."""
        cap, left = spent.cap()
        sub = sub_problem(problem, data, alpha)
        init = {"x": state["x"]} | ({"dual": state["dual"]} if state["dual"] is not None else {})
        rec = final(run_pdhg(sub, StopRule(max_iter=cap, tol=tol, time_budget=left), options,
                             init, cancel, cap))
        spent.spend(rec.iteration)
        state["x"], state["dual"] = rec.x, None if rec.warm is None else rec.warm.dual
        value = float(discrepancy_ratio(residual_norms(problem, rec.x), delta).mean())
        trail.append((alpha, value))
        results[alpha] = (value, rec.x, state["dual"])
        if rec.stop_reasons and StopReason.CANCELLED.value in rec.stop_reasons:
            raise _Cancelled
        return value

    try:
        if rule == "quasi-optimality":
            def solve_at(alpha: float) -> Generator[None, None, tuple[Tensor, bool]]:
                if alpha not in results:  # a walk resumed below a plateau has solved it
                    ratio(alpha)  # cancellation and the budget end the walk by exceptions
                return results[alpha][1], False
                yield  # a generator with nothing to stream

            walk, pair = QUASI, None
            while True:
                alphas, k = drain(quasi_optimality_walk(walk, solve_at))
                assert k is not None  # solve_at never stops the walk itself
                if len(alphas) < 2:  # resumed at the path's lowest alpha: keep the last pair
                    break
                pair = alphas, k
                if not _on_plateau(results, alphas, k) or alphas[k + 1] / FACTOR < LOWEST:
                    break
                walk = replace(walk, start=alphas[k + 1])
            assert pair is not None  # the first walk, from 9 START down, has several alphas
            return _pair(results, *pair, spent.used, trail, saturated=False)
        return _discrepancy(ratio, results, state, eta, spent, trail)
    except _Cancelled:
        x_now = state["x"]
        assert x_now is not None  # x0, then every solve's x: never None
        return AlphaSearch(trail[-1][0], x_now, state["dual"], spent.used, trail, cancelled=True)
    except OutOfBudget:
        if not results:
            return AlphaSearch(START, x0, None, spent.used, trail, exhausted=True)
        found = _saturated(results, eta, spent.used, trail)
        found.exhausted = True
        return found


#: A quasi-optimality step below this fraction of the iterate's norm: both alphas gave the same
#: solution, the over-regularised limit (TV's constant image, where any larger alpha changes
#: nothing), not a minimum of the function: 1.6e-7 between the flat images of alpha 0.9 and
#: 0.3 on the small residual network of tests/cli/test_layerwise_graph.py, against steps of
#: 0.07 to 0.12 of the iterate on mnist-cnn-ae's validation digit 7 at sigma 0.05.
PLATEAU = 1e-5


def _on_plateau(results: dict, alphas: list[float], k: int) -> bool:
    """Whether the chosen step k (between alphas k and k + 1) is a plateau: the walk then
    resumes from alpha k + 1 (``PLATEAU``)."""
    if k + 1 >= len(alphas):
        return False
    x, below = results[alphas[k]][1], results[alphas[k + 1]][1]
    step = float((below - x).reshape(-1).to(torch.float64).norm())
    return step <= PLATEAU * float(below.reshape(-1).to(torch.float64).norm())


def _discrepancy(ratio: Callable[[float], float], results: dict, state: dict, eta: float,
                 spent: Budget, trail: list) -> AlphaSearch:
    """The largest alpha whose mean ratio is within eta: a factor-3 walk from START towards
    the crossing, then one log-linear interpolation of the ratio inside the bracket; the
    saturation fallback when the ratio stops falling above eta (module docstring)."""
    alpha = START
    r = ratio(alpha)
    if r <= eta:  # go up while the data are still reproduced
        lo = alpha
        while r <= eta and alpha < HIGHEST:
            lo, alpha = alpha, alpha * FACTOR
            r = ratio(alpha)
        hi = alpha
    else:
        hi = alpha
        while r > eta and alpha > LOWEST:
            hi, alpha, previous = alpha, alpha / FACTOR, r
            r = ratio(alpha)
            if r > eta and r > (1.0 - SATURATION) * previous:  # saturated: see above
                state["x"], state["dual"] = results[START][1], results[START][2]
                for above in (START * FACTOR, START * FACTOR * FACTOR):
                    ratio(above)
                return _saturated(results, eta, spent.used, trail)
        lo = alpha
    r_lo, r_hi = results[lo][0], results[hi][0]
    if lo != hi and r_lo <= eta < r_hi:
        mid = log_linear((lo, r_lo), (hi, r_hi), eta, log_values=False, flat=0.0)
        state["x"], state["dual"] = results[lo][1], results[lo][2]
        if ratio(mid) <= eta:
            lo = mid
    elif r_hi <= eta:  # the data are reproduced even at the highest alpha tried
        lo = hi
    _, x, dual = results[lo]
    return AlphaSearch(lo, x, dual, spent.used, trail)


def _saturated(results: dict, eta: float, used: int, trail: list) -> AlphaSearch:
    """eta delta out of reach: quasi-optimality among the alphas tried (module docstring);
    otherwise (a budget cut) the largest alpha tried whose ratio is within eta."""
    floor = min(value for value, _, _ in results.values())
    if floor > eta and len(results) >= 2:
        return _quasi_optimal(results, used, trail, saturated=True)
    else:
        alpha = max(a for a, (value, _, _) in results.items() if value <= eta * max(floor, 1.0))
    _, x, dual = results[alpha]
    return AlphaSearch(alpha, x, dual, used, trail, saturated=floor > eta)


def _quasi_optimal(results: dict, used: int, trail: list, saturated: bool) -> AlphaSearch:
    """The first local minimum of the quasi-optimality function among the alphas tried, from
    the largest down."""
    alphas = sorted(results, reverse=True)
    k = quasi_minimum(quasi_optimality([results[a][1] for a in alphas]), "first-local")
    return _pair(results, alphas, k, used, trail, saturated)


def _pair(results: dict, alphas: list[float], k: int, used: int, trail: list,
          saturated: bool) -> AlphaSearch:
    """alpha the geometric mean of the chosen step's pair (the step measures the middle of its
    interval), the warm start the pair's smaller alpha's result."""
    near = alphas[k + 1]
    _, x, dual = results[near]
    return AlphaSearch(math.sqrt(alphas[k] * near), x, dual, used, trail, saturated=saturated)


class _Cancelled(Exception):
    pass


