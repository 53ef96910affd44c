"""One solve of the alpha path: how it is run (``PathSolve``), and when it has settled.

A path solve ends when its residual and objective have settled (``_Settled``), not by the
run's own stop rule, because the alpha rules (``whole``) read the residual.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Generator, Iterator
from typing import Any

from lbi_engine.protocols import Problem
from lbi_engine.solvers.base import IterateRecord

#: A path solve (the chosen alpha's solve uses the run's own stop rule) ends when its
#: residual and objective both changed by less than PATH_RTOL (relative) over PATH_SPAN
#: iterations, twice in a row, after at least PATH_MIN_STEPS: the rules read the residual,
#: which the objective rule (1e-3) left several percent off after a warm start, because the
#: objective settles before the residual does. Path solves report every
#: PATH_REPORT iterations for this check.
PATH_RTOL = 3e-3
PATH_SPAN = 5
PATH_MIN_STEPS = 20
PATH_REPORT = 5
#: A path solve whose residual creeps is not settled however little it moves per span: when
#: two consecutive spans moved it by nearly as much (ratio >= CREEP_RATIO), the move still
#: to come, estimated as a geometric tail move * q / (1 - q), must be within PATH_RTOL too.
#: Moves below CREEP_FLOOR (relative) are rounding and settle. On a 64x64 tanh encoder the
#: residual crept by < 0.3 % per span for thousands of steps, and nine path solves passed at
#: their 20 steps with most of their way to go, which sent the search the wrong way.
CREEP_RATIO = 0.9
CREEP_FLOOR = 1e-5

#: ``solve(problem, init, path_tol)``: runs the method and yields its records. ``path_tol``
#: None: the run's own stop rule (the chosen alpha's solve); a number: a path solve, records
#: every PATH_REPORT iterations, the objective rule at that tolerance (0: none, the search
#: ends the solve once :class:`_Settled`).
PathSolve = Callable[[Problem, "dict[str, Any] | None", "float | None"],
                     Iterator[IterateRecord]]


def _with_alpha(problem: Problem, alpha: float) -> Problem:
    return dataclasses.replace(problem, alpha=alpha, extras=dict(problem.extras))


def _solve_at(problem: Problem, alpha: float, solve: PathSolve, init: dict[str, Any] | None,
              stage: str, offset: float, path_tol: float = 0.0,
              ) -> Generator[IterateRecord, None, tuple[IterateRecord, IterateRecord]]:
    """Yields one path solve's records as non-final, their solver time counted from
    ``offset`` (the path's so far), until the solve stops, or, with ``path_tol`` 0, until
    :class:`_Settled` says its residual and objective have settled; returns (first, last)
    records with their own time."""
    first: IterateRecord | None = None
    last: IterateRecord | None = None
    settled = _Settled() if path_tol == 0.0 else (lambda record, first: False)
    for record in solve(_with_alpha(problem, alpha), init, path_tol):
        first = record if first is None else first
        last = record
        shown = dataclasses.replace(record, final=False, stop_reasons=None, stage=stage,
                                    elapsed=record.elapsed + offset)
        yield shown
        if settled(record, first):
            break
    assert first is not None and last is not None
    return first, last


class _Settled:
    """The path solves' stop test on sample 0: the residual d and the objective both changed
    by at most PATH_RTOL (relative) over PATH_SPAN iterations, twice in a row, after at
    least PATH_MIN_STEPS (20: after a small change of alpha d moves slowly at first, and
    with 10 such solves passed with most of their way to go), and d not creeping: a span
    whose move is nearly the last one's (CREEP_RATIO) counts only when the geometric tail
    of such moves is within PATH_RTOL too."""

    def __init__(self) -> None:
        self.previous: tuple[int, float, float] | None = None
        self.calm = 0
        self.last_move: float | None = None  # |d - d0| over the last span

    def __call__(self, record: IterateRecord, first: IterateRecord) -> bool:
        k = int(record.iteration)
        d, e = float(record.discrepancy[0]), float(record.objective[0])
        if not (math.isfinite(d) and math.isfinite(e)):
            return False
        if self.previous is None or k - self.previous[0] < PATH_SPAN:
            self.previous = self.previous or (k, d, e)
            return False
        _, d0, e0 = self.previous
        self.previous = (k, d, e)
        still = (abs(d - d0) <= PATH_RTOL * max(abs(d), 1e-30)
                 and abs(e - e0) <= PATH_RTOL * max(abs(e), 1e-30))
        move, before = abs(d - d0), self.last_move
        self.last_move = move
        if still and before and move > CREEP_FLOOR * abs(d):
            q = move / before
            still = q < CREEP_RATIO or (q < 1.0 and move * q / (1.0 - q)
                                        <= PATH_RTOL * abs(d))
        self.calm = self.calm + 1 if still else 0
        return self.calm >= 2 and k - int(first.iteration) >= PATH_MIN_STEPS
