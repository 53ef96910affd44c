"""What a running inversion has done and has left, for the window's status line and progress
bar. The stage words and the time left are the engine's
(:class:`lbi_engine.results.progress.ProgressTracker`, the rule ``lbi invert`` shows on its
progress line); this adapter only feeds it the curve points the window receives and says
what the window shows of its answer. Qt-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from lbi_engine.results.progress import Progress, ProgressTracker


@dataclass(frozen=True)
class RunStatus:
    """The status line's parts and the progress bar's state for one moment of a run."""

    #: the tracker's words: "start", "α search point 3 of ≤ 10 (α 0.012)", "final solve"
    stage: str
    iteration: int
    #: the run's solver seconds (a pause does not count)
    elapsed: float
    #: "≈ 12 s left" (an estimate) or "≤ 12 s left" (a bound); "" when unknown
    left: str
    #: the seconds of ``left`` (None: unknown)
    remaining: float | None
    #: fraction done for the progress bar; None: unknown (a run that may stop earlier)
    fraction: float | None

    def iteration_text(self) -> str:
        """"k = 240 · final solve"."""
        return f"k = {self.iteration} · {self.stage}"

    def time_text(self) -> str:
        """"3.1 s · ≈ 12 s left"."""
        return " · ".join(t for t in (f"{self.elapsed:.1f} s", self.left) if t)


class RunProgress:
    """The progress of one run (make a new one for each run): :meth:`feed` it the curve points
    as they arrive, read :meth:`status`. ``request``: the run's parameters (its stop rule)."""

    def __init__(self, request: dict[str, Any]) -> None:
        self._tracker = ProgressTracker(max_iter=1, tol=0.0, tol_mode="relative",
                                        clock=lambda: 0.0)
        self.follow(request)
        self._last: Progress | None = None
        self._iteration = 0

    def follow(self, request: dict[str, Any]) -> None:
        """Takes ``request``'s stop rule (at the start, and when a warm restart changes it)."""
        t = self._tracker
        t.max_iter = max(1, int(request.get("max_iter") or 1))
        t.tol = float(request.get("tol") or 0.0)
        t.tol_mode = str(request.get("tol_mode") or "relative")
        budget = request.get("time_budget")
        t.time_budget = float(budget) if budget else None
        self._stops_early = t.tol > 0  # an alpha search shows by its records' stages

    def feed(self, points: list[dict[str, Any]]) -> None:
        """Reads curve points (the run driver's dicts: iteration, elapsed, objective,
        residuals, stage, position) as the engine's records, made at their ``elapsed``. A
        point's ``position`` is the record's ``RunPosition`` as a dict (its class would load
        the engine here), read back by its fields."""
        for n, p in enumerate(points, 1):
            record = SimpleNamespace(
                iteration=int(p["iteration"]), objective=p.get("objective"),
                primal_residual=p.get("primal_residual"),
                dual_residual=p.get("dual_residual"), stage=p.get("stage") or "",
                position=SimpleNamespace(**p["position"]) if p.get("position") else None,
                final=False)
            self._last = self._tracker.update(record, at=float(p.get("elapsed") or 0.0),
                                              estimate=n == len(points))
            self._iteration = record.iteration

    def status(self) -> RunStatus:
        """What the window shows now."""
        last = self._last
        if last is None:
            return RunStatus("start", 0, 0.0, "", None, None if self._stops_early else 0.0)
        searching = last.stage in ("alpha search", "final solve")
        fraction = None if self._stops_early or searching else min(
            1.0, self._iteration / self._tracker.max_iter)
        return RunStatus(last.stage_text(), self._iteration, last.elapsed, last.left_text(),
                         last.remaining, fraction)
