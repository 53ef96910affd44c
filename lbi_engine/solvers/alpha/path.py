"""The machinery every alpha rule runs on: a geometric path of warm-started solves, the
quasi-optimality function and its minimum, the log-linear interpolation between two alphas
that bracket a target, the discrepancy ratio, and the budget that cuts a search short.

The rules differ in what they read off these pieces, not in the pieces: the whole-network
search (``whole.py``) and the layer-wise input stage's search (``stage.py``) were calibrated
separately (benchmarks/NOTES.md, docs/LAYERWISE.md), so each keeps its constants and its way
of choosing, and both walk, measure and interpolate with the functions here.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import torch
from torch import Tensor

from lbi_engine.protocols import Problem

#: The two minima a quasi-optimality rule can read: the smallest step of the whole path, or
#: the first step that is not larger than the next one (Raus & Haemarik 2018: the global
#: minimiser can fail where capped solves at small alpha hardly move).
Minimum = Literal["global", "first-local"]
#: A residual and its noise norm: numbers (sample 0) or tensors (per sample).
Value = TypeVar("Value", float, Tensor)


def geometric(start: float, factor: float, lowest: float, highest: float) -> Iterator[float]:
    """start, start * factor, start * factor^2, .. while the alpha lies in [lowest, highest]
    (the low end with a relative slack of 1e-9, so that a path meant to end at ``lowest``
    does not stop one rounding short of it). ``factor`` < 1 walks down."""
    alpha = start
    while lowest * (1 - 1e-9) <= alpha <= highest:
        yield alpha
        alpha *= factor


def quasi_optimality(xs: Sequence[Tensor]) -> list[float]:
    """||x_k - x_{k+1}|| between neighbours, the iterates ordered by alpha (largest first),
    in float64."""
    flat = [x.reshape(-1).to(torch.float64) for x in xs]
    return [float(torch.linalg.vector_norm(b - a)) for a, b in zip(flat[:-1], flat[1:],
                                                                     strict=True)]


def quasi_minimum(steps: Sequence[float], minimum: Minimum) -> int:
    """The index k of the chosen step ``steps[k]`` (between alphas k and k + 1): the first
    smallest one (``"global"``), or the first with ``steps[k] <= steps[k + 1]``
    (``"first-local"``, the last step when they keep falling)."""
    if minimum == "global":
        return min(range(len(steps)), key=steps.__getitem__)
    return next((k for k in range(len(steps) - 1) if steps[k] <= steps[k + 1]),
                len(steps) - 1)


def at_first_local_minimum(steps: Sequence[float]) -> bool:
    """Whether the newest step is not smaller than the one before: a walk down the path that
    reads the first local minimum can stop there."""
    return len(steps) >= 2 and steps[-2] <= steps[-1]


@dataclass(frozen=True)
class QuasiOptimality:
    """A quasi-optimality rule: warm solves at ``start``, ``start * factor``, .. within
    [lowest, highest], alpha read off the minimum of ||x_k - x_{k+1}|| (``minimum``); a
    first-local rule stops walking once it has seen its minimum."""

    start: float
    factor: float
    lowest: float
    highest: float
    minimum: Minimum


Record = TypeVar("Record")
Result = TypeVar("Result")
#: ``solve_at(alpha)``: one warm solve on the path (yielding whatever the caller streams);
#: returns the iterate the rule compares and whether the search must stop there (cancelled,
#: out of time, diverged).
SolveAt = Callable[[float], Generator[Record, None, tuple[Tensor, bool]]]


def quasi_optimality_walk(rule: QuasiOptimality, solve_at: SolveAt[Record],
                          ) -> Generator[Record, None, tuple[list[float], int | None]]:
    """Walks ``rule``'s path with ``solve_at`` and returns the alphas solved at and the
    index k of the chosen step (between alphas k and k + 1; 0 for a one-point path), or
    None when a solve stopped the search."""
    alphas: list[float] = []
    xs: list[Tensor] = []
    for alpha in geometric(rule.start, rule.factor, rule.lowest, rule.highest):
        x, stop = yield from solve_at(alpha)
        alphas.append(alpha)
        xs.append(x)
        if stop:
            return alphas, None
        if rule.minimum == "first-local" and at_first_local_minimum(quasi_optimality(xs)):
            break
    if len(xs) < 2:
        return alphas, len(xs) - 1
    return alphas, quasi_minimum(quasi_optimality(xs), rule.minimum)


def drain(search: Generator[object, None, Result]) -> Result:
    """The return value of a search whose records nobody streams."""
    while True:
        try:
            next(search)
        except StopIteration as done:
            return done.value


def log_linear(lo: tuple[float, float], hi: tuple[float, float], target: float, *,
               log_values: bool, flat: float) -> float:
    """The alpha at which the value meets ``target``, log alpha interpolated linearly between
    ``lo`` and ``hi`` (each ``(alpha, value)``, the value below and above the target): in log
    value (``log_values``) or in the value itself. ``flat``: the fraction of the way from lo
    to hi when the values do not rise between them."""
    (a_lo, v_lo), (a_hi, v_hi) = lo, hi
    if log_values:
        v_lo, v_hi, target = math.log(v_lo), math.log(v_hi), math.log(target)
    span = v_hi - v_lo
    t = (target - v_lo) / span if span > 0 else flat
    return math.exp(math.log(a_lo) + t * (math.log(a_hi) - math.log(a_lo)))


def discrepancy_ratio(residual: Value, delta: Value) -> Value:
    """||N(x_alpha) - y_delta|| over the noise norm it is matched to (a number or per sample):
    1 is Morozov's crossing."""
    return residual / delta


def residual_norms(problem: Problem, x: Tensor) -> Tensor:
    """||N(x)_i - y_delta_i|| per sample i of the problem (no gradient)."""
    with torch.no_grad():
        residual = problem.network.forward(x) - problem.y_delta
        return residual.reshape(problem.batch, -1).norm(dim=1)


class OutOfBudget(Exception):
    """The iteration or time budget of a search is spent."""


@dataclass
class Budget:
    """The iterations and seconds a search may spend in all, each solve capped at
    ``per_solve`` iterations; ``cap()`` raises :class:`OutOfBudget` when nothing is left."""

    iterations: int
    per_solve: int
    seconds: float | None = None
    used: int = 0
    started: float = field(default_factory=time.perf_counter)

    def cap(self) -> tuple[int, float | None]:
        """(iterations, seconds) the next solve may take."""
        cap = min(self.per_solve, self.iterations - self.used)
        left = None if self.seconds is None else \
            self.seconds - (time.perf_counter() - self.started)
        if cap < 1 or (left is not None and left <= 0):
            raise OutOfBudget
        return cap, left

    def spend(self, iterations: int) -> None:
        self.used += iterations
