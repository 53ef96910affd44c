"""Where a run of alpha "auto" spent its time: the start, each solve of the alpha search and
the final solve, as typed entries (result.json's ``time_split``; every record of the search
names its stage and path point in ``extras``, :func:`position`).

Why typed and apart: the command line's progress line and the window's status line show the
stage a run is in and how long each took, and read these fields rather than parsing the
records' ``stage`` text.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

Result = TypeVar("Result")

#: ``RunStage.stage`` values, in the order a run passes them
STAGES = ("start", "alpha search", "final solve")


@dataclass(frozen=True)
class RunStage:
    """One stage of a run: ``stage`` (one of :data:`STAGES`), the alpha and hidden-layer
    weight it solved at (None for the start), its iterations and solver seconds; ``point``
    is the solve's number in the whole search (1-based; a raised search goes on counting)."""

    stage: str
    iterations: int
    seconds: float
    alpha: float | None = None
    hidden_weight: float | None = None
    point: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def position(point: int, points_at_most: int) -> dict[str, Any]:
    """What a search record's ``extras`` say of its place: solve ``point`` of at most
    ``points_at_most`` (the search usually stops earlier, when a residual matches)."""
    return {"run_stage": "alpha search", "alpha_point": point,
            "alpha_points_at_most": points_at_most}


def positioned(solve: Generator[Any, None, Result],
               where: dict[str, Any]) -> Generator[Any, None, Result]:
    """A path solve's records (``path_solve._solve_at``: each a copy of the solver's) with
    ``where`` (:func:`position`) added to their ``extras``; returns what the solve returns."""
    while True:
        try:
            record = next(solve)
        except StopIteration as done:
            return done.value
        record.extras = {**record.extras, **where}
        yield record


def time_split(start_seconds: float, searched: list[tuple[Any, float]],
               final_alpha: float, final_weight: float, final_iterations: int,
               final_seconds: float) -> list[dict[str, Any]]:
    """result.json's ``time_split``: the start (first guess and start point), every search
    solve (``searched``: (PathPoint, hidden weight) in the order they ran) and the final
    solve."""
    stages = [RunStage("start", 0, start_seconds)]
    stages += [RunStage("alpha search", p.iterations, p.seconds, p.alpha, weight, k + 1)
               for k, (p, weight) in enumerate(searched)]
    stages.append(RunStage("final solve", final_iterations, final_seconds, final_alpha,
                           final_weight))
    return [s.to_dict() for s in stages]
