"""alpha of the input stage of the layer-wise method, when the noise level is known.

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
eta delta fits that error. ``python -m benchmarks.bench_layerwise_alpha`` measures both
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
import time
from dataclasses import dataclass, field
from typing import cast

import torch
from torch import Tensor

from lbi_engine.protocols import Problem
from lbi_engine.settings.solver import SolverOptions
from lbi_engine.solvers.base import CancelToken, StopReason, StopRule, final

START, FACTOR, LOWEST, HIGHEST = 0.1, 3.0, 1e-6, 1e4
SEARCH_ITER = 120
SATURATION = 0.03


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
    from lbi_engine.solvers.pdhg import run_pdhg

    state: dict[str, Tensor | None] = {"x": x0, "dual": None}
    used = 0
    trail: list[tuple[float, float]] = []
    results: dict[float, tuple[float, Tensor, Tensor | None]] = {}

    start = time.perf_counter()

    def ratio(alpha: float) -> float:
        nonlocal used
        cap = min(SEARCH_ITER, budget - used)
        left = None if time_budget is None else time_budget - (time.perf_counter() - start)
        if cap < 1 or (left is not None and left <= 0):
            raise _OutOfBudget
        sub = sub_problem(problem, data, alpha)
        init = {"x": state["x"]} | ({"dual": state["dual"]} if state["dual"] is not None else {})
        rec = final(run_pdhg(sub, StopRule(max_iter=cap, tol=tol, time_budget=left), options,
                             init, cancel, cap))
        used += rec.iteration
        state["x"], state["dual"] = rec.x, rec.extras.get("dual")
        with torch.no_grad():
            residual = problem.network.forward(rec.x) - problem.y_delta
            disc = residual.reshape(problem.batch, -1).norm(dim=1)
        value = float((disc / delta).mean())
        trail.append((alpha, value))
        results[alpha] = (value, rec.x, state["dual"])
        if rec.stop_reasons and StopReason.CANCELLED.value in rec.stop_reasons:
            raise _Cancelled
        return value

    try:
        if rule == "quasi-optimality":
            alpha = START * FACTOR * FACTOR
            ratio(alpha)
            while alpha / FACTOR >= LOWEST:
                alpha /= FACTOR
                ratio(alpha)
                steps = _steps(results)
                if len(steps) >= 2 and steps[-2] <= steps[-1]:
                    break
            return _quasi_optimal(results, used, trail, saturated=False)
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
                    return _saturated(results, eta, used, trail)
            lo = alpha
        r_lo, r_hi = results[lo][0], results[hi][0]
        if lo != hi and r_lo <= eta < r_hi:
            # one log-linear interpolation of the ratio between the bracket
            frac = (eta - r_lo) / (r_hi - r_lo) if r_hi > r_lo else 0.0
            mid = math.exp(math.log(lo) + frac * (math.log(hi) - math.log(lo)))
            state["x"], state["dual"] = results[lo][1], results[lo][2]
            if ratio(mid) <= eta:
                lo = mid
        elif r_hi <= eta:  # the data are reproduced even at the highest alpha tried
            lo = hi
        _, x, dual = results[lo]
        return AlphaSearch(lo, x, dual, used, trail)
    except _Cancelled:
        x_now = state["x"]
        assert x_now is not None  # x0, then every solve's x: never None
        return AlphaSearch(trail[-1][0], x_now, state["dual"], used, trail, cancelled=True)
    except _OutOfBudget:
        if not results:
            return AlphaSearch(START, x0, None, used, trail, exhausted=True)
        found = _saturated(results, eta, used, trail)
        found.exhausted = True
        return found


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


def _steps(results: dict) -> list[float]:
    """||x_k - x_{k+1}|| between neighbouring alphas tried, from the largest down."""
    xs = [results[a][1].reshape(-1).double() for a in sorted(results, reverse=True)]
    return [float((b - a).norm()) for a, b in zip(xs[:-1], xs[1:], strict=True)]


def _quasi_optimal(results: dict, used: int, trail: list, saturated: bool) -> AlphaSearch:
    """The first local minimum of the quasi-optimality function from the largest alpha down;
    alpha the geometric mean of its pair, the warm start the pair's smaller alpha's result."""
    alphas, steps = sorted(results, reverse=True), _steps(results)
    k = next((k for k in range(len(steps) - 1) if steps[k] <= steps[k + 1]), len(steps) - 1)
    near = alphas[k + 1]
    _, x, dual = results[near]
    return AlphaSearch(math.sqrt(alphas[k] * near), x, dual, used, trail, saturated=saturated)


class _Cancelled(Exception):
    pass


class _OutOfBudget(Exception):
    pass
