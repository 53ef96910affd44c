"""What a record says of alpha and of its place in a run, as typed fields of
:class:`~lbi_engine.solvers.base.IterateRecord`: :class:`RunPosition` (the stage of an alpha
"auto" run a record belongs to) and :class:`AlphaChoice` (the alpha a run chose and how).

Why typed: result.json, the command line's progress line, the window's status line and the
studies all read them; as string keys of a free-form dict each reader had to know the keys
and a misspelt one read as absent. Torch-free, so that the records' other readers need not
load more than the solvers do.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: One solve of alpha "auto"'s path in its on-disk form (result.json's ``alpha_path``): the
#: fields of ``alpha.residual_path.PathPoint`` or ``alpha.continuation.SmoothPoint``.
PathEntry = dict[str, float | int | None]


@dataclass(frozen=True)
class RunStage:
    """One stage of a run: ``stage`` (one of ``alpha.time_split.STAGES``), the alpha and
    hidden-layer weight it solved at (None for the start), its iterations and solver seconds;
    ``point`` is the solve's number in the whole search (1-based; a raised search goes on
    counting)."""

    stage: str
    iterations: int
    seconds: float
    alpha: float | None = None
    hidden_weight: float | None = None
    point: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunPosition:
    """Where a record of an alpha "auto" run stands: ``stage`` "alpha search" (then solve
    ``point`` of at most ``points_at_most``; the search usually stops earlier, when a
    residual matches) or "final solve"; ``alpha``: the alpha of a continuation path's point
    (None elsewhere)."""

    stage: str
    point: int | None = None
    points_at_most: int | None = None
    alpha: float | None = None


@dataclass
class AlphaChoice:
    """The alpha a run chose and how (result.json's ``alpha*`` keys and ``time_split``).

    ``alpha``, ``rule``: the chosen alpha and the rule that chose it (the layer-wise
    method's input stage: only these two). The alpha "auto" of a whole network adds:
    ``path`` (one entry per solve, in the order they ran), ``target`` (the discrepancy
    principle's tau * delta; None for other rules), ``seconds`` (solver time of the whole
    choice, path and final solve), ``solver_steps`` (every step the run took: the path
    solves and the final one), ``time_split`` (the start, each search solve, the final
    solve); the continuation path ``path_forward`` (which N(x) it ran); a search that raised
    the hidden weight ``hidden_weight_rule`` (why) and ``path_unweighted`` (the search at
    weight 1 before the raise, when there was one)."""

    alpha: float
    rule: str
    path: list[PathEntry] | None = None
    target: float | None = None
    seconds: float | None = None
    solver_steps: int | None = None
    time_split: list[RunStage] | None = None
    path_forward: str | None = None
    hidden_weight_rule: str | None = None
    path_unweighted: list[PathEntry] | None = None
