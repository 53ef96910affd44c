"""Where a run of alpha "auto" spent its time: the start, each solve of the alpha search and
the final solve, as typed entries (result.json's ``time_split``; every record of the search
names its stage and path point in its ``position``, :func:`position`).

Why typed and apart: the command line's progress line and the window's status line show the
stage a run is in and how long each took, and read these fields rather than parsing the
records' ``stage`` text.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

from lbi_engine.solvers.choice import RunPosition, RunStage

Result = TypeVar("Result")

#: ``RunStage.stage`` values, in the order a run passes them
STAGES = ("start", "alpha search", "final solve")


def position(point: int, points_at_most: int, alpha: float | None = None) -> RunPosition:
    """A search record's place: solve ``point`` of at most ``points_at_most`` (the search
    usually stops earlier, when a residual matches)."""
    return RunPosition("alpha search", point, points_at_most, alpha)


def positioned(solve: Generator[Any, None, Result],
               where: RunPosition) -> Generator[Any, None, Result]:
    """A path solve's records (``path_solve._solve_at``: each a copy of the solver's) with
    their ``position`` set to ``where`` (:func:`position`); returns what the solve returns."""
    while True:
        try:
            record = next(solve)
        except StopIteration as done:
            return done.value
        record.position = where
        yield record


def time_split(start_seconds: float, searched: list[tuple[Any, float]],
               final_alpha: float, final_weight: float, final_iterations: int,
               final_seconds: float) -> list[RunStage]:
    """result.json's ``time_split``: the start (first guess and start point), every search
    solve (``searched``: (PathPoint, hidden weight) in the order they ran) and the final
    solve."""
    stages = [RunStage("start", 0, start_seconds)]
    stages += [RunStage("alpha search", p.iterations, p.seconds, p.alpha, weight, k + 1)
               for k, (p, weight) in enumerate(searched)]
    stages.append(RunStage("final solve", final_iterations, final_seconds, final_alpha,
                           final_weight))
    return stages
