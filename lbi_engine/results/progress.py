"""What a long run is doing, in words a person reads: its stage, its iterations, its objective,
the time so far and an honest estimate of the time left (Qt-free and torch-free, so that the
command line and the window read the same events).

:class:`ProgressTracker` reads the iterate records a run already yields (``api.iterate``) and
turns each into a :class:`Progress`. It knows a run's stages by the typed ``position`` the
alpha search sets on its records (``stage``: "alpha search" or "final solve", ``point`` k of
at most ``points_at_most``, lbi_engine/solvers/choice.py ``RunPosition``), else by the
records' ``stage`` text (``"alpha search: A"``, ``"alpha path: A"``); a fixed
alpha is one solve; the layer-wise method names its layers.

The time left is measured, never assumed:

* within a solve, from the stop rule itself: the rule's measure (the objective's relative
  change over the second half of the solve, or the per-iteration change of x) is fitted over
  the solve's second half as a power of the iteration count and as an exponential, and the
  better fit is extrapolated to the tolerance; the iterations that leaves, capped by the
  iteration cap, times the solve's measured wall time per iteration. Shown as "≈".
* when the measure does not fall (yet), only the iteration cap bounds the solve: "≤".
* during the alpha search, from the mean wall time of its finished points and the most points
  the search may take (it usually takes fewer), plus one more such point for the final solve.
* before any timing exists (the start), nothing is estimated: the elapsed time alone.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from lbi_engine.results.stop_forecast import iterations_to_stop

#: The records' stage text of the alpha search's path solves (lbi_engine/solvers/alpha).
ALPHA_STAGE_PREFIXES = ("alpha search", "alpha path")


@dataclass(frozen=True)
class Progress:
    """One report of a running inversion, for a progress line or a status bar."""

    #: "start" (or "start: what it does"), "alpha search", "final solve", "solve", or the
    #: method's own stage (e.g. "layer 2/3"); "done" once the final record arrived
    stage: str
    #: the alpha search's point k (1-based) and the most points it may take; None elsewhere
    point: int | None = None
    points: int | None = None
    #: the alpha of the current solve when the stage names one
    alpha: float | None = None
    #: iterations of the current stage, and the iteration cap of a solve
    iteration: int = 0
    iteration_cap: int | None = None
    #: iterations of the whole run so far (every stage)
    steps: int = 0
    objective: float | None = None
    #: wall seconds since the tracker started
    elapsed: float = 0.0
    #: seconds left: an estimate ("≈"), a bound from the caps ("≤"), or None (unknown)
    remaining: float | None = None
    remaining_is_bound: bool = False
    final: bool = False

    def stage_text(self) -> str:
        """The stage in words: "α search point 2 of ≤ 10 (α 3.2e-03)", "final solve"."""
        if self.stage == "alpha search" and self.point is not None:
            text = f"α search point {self.point}"
            if self.points is not None:
                text += f" of ≤ {self.points}"
            return text + (f" (α {self.alpha:.2g})" if self.alpha is not None else "")
        return self.stage

    def time_text(self) -> str:
        """"12 s, ≈ 30 s left" (or "≤", or the elapsed time alone when nothing is known)."""
        return ", ".join(t for t in (duration(self.elapsed), self.left_text()) if t)

    def left_text(self) -> str:
        """"≈ 30 s left" (an estimate) or "≤ 30 s left" (a bound); "" when nothing is known."""
        if self.remaining is None or self.final:
            return ""
        return f"{'≤' if self.remaining_is_bound else '≈'} {duration(self.remaining)} left"

    def text(self) -> str:
        """The whole line: stage, time so far and left, iterations, objective."""
        parts = [self.stage_text(), self.time_text()]  # first: a narrow terminal cuts the end
        if not self.stage.startswith("start"):
            cap = f"/{self.iteration_cap}" if self.iteration_cap else ""
            parts.append(f"it {self.iteration}{cap}")
        if self.objective is not None:
            parts.append(f"objective {self.objective:.5g}")
        return " · ".join(parts)


def duration(seconds: float) -> str:
    """12 s, 3 min 05 s, 1 h 02 min."""
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


@dataclass
class _Stage:
    name: str
    key: tuple[str, int | None]  # stage text, alpha point: a new one is a new stage or point
    first_iteration: int
    first_wall: float
    history: list[tuple[int, float, float | None, float | None]]  # (it, wall, objective, dx)


class ProgressTracker:
    """Turns a run's records into :class:`Progress` events (thread-safe: a display thread may
    call :meth:`now` while the run's thread calls :meth:`update`).

    ``max_iter``, ``tol``, ``tol_mode``, ``time_budget``: the run's stop rule;
    ``alpha_points``: the most solves the alpha search may take (None: no search expected).
    """

    def __init__(self, *, max_iter: int, tol: float, tol_mode: str,
                 time_budget: float | None = None, alpha_points: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_iter = int(max_iter)
        self.tol, self.tol_mode, self.time_budget = float(tol), tol_mode, time_budget
        self.alpha_points, self._clock, self._started = alpha_points, clock, clock()
        self._lock = threading.Lock()
        self._stage: _Stage | None = None
        self._searched = False
        self._point = 0
        self._points_at_most: int | None = None  # the search's own bound (records' position)
        self._point_seconds: list[float] = []
        self._steps_before = 0  # iterations of the finished stages
        self._last = Progress("start")
        self._last_wall = self._started

    def starting(self, what: str) -> None:
        """Names what the start is doing before the first record (e.g. "loading the
        network"): shown as "start: <what>"."""
        with self._lock:
            if self._stage is None:
                wall = self._clock()
                self._last = Progress(f"start: {what}", elapsed=wall - self._started)
                self._last_wall = wall

    # -- reading records -------------------------------------------------------------------
    def update(self, record: Any, at: float | None = None, *,
               estimate: bool = True) -> Progress:
        """The event of one record (an ``IterateRecord`` or anything with its fields);
        ``at``: seconds since the start when the record was made, for a front end that
        receives records in batches (None: now); ``estimate`` False skips the time left
        (for all but the last record of a batch: only the last one is shown)."""
        wall = self._clock() if at is None else self._started + float(at)
        text = str(getattr(record, "stage", "") or "")
        where = getattr(record, "position", None)  # a RunPosition, or any with its fields
        run_stage = None if where is None else where.stage
        alpha_stage = (run_stage == "alpha search" if run_stage
                       else text.startswith(ALPHA_STAGE_PREFIXES))
        point = where.point if alpha_stage and where is not None else None
        key = (text, None if point is None else int(point))
        iteration = int(record.iteration)
        objective = _number(record.objective)
        with self._lock:
            if record.final:
                event = replace(self._last, stage="done", objective=objective,
                                elapsed=wall - self._started, remaining=0.0, final=True,
                                steps=self._steps(iteration))
                self._last, self._last_wall = event, wall
                return event
            if self._stage is None or key != self._stage.key:
                self._new_stage(key, alpha_stage, run_stage == "final solve", iteration, wall,
                                None if where is None else where.points_at_most)
            stage = self._stage
            assert stage is not None
            change = None if self.tol_mode == "objective" else _change(record)
            stage.history.append((iteration, wall, objective, change))
            done = iteration - stage.first_iteration
            remaining, bound = (self._remaining(stage, done, wall, alpha_stage) if estimate
                                else (None, False))
            event = Progress(
                stage=stage.name, point=self._point if alpha_stage else None,
                points=self._points() if alpha_stage else None,
                alpha=_alpha_of(text) if alpha_stage else None, iteration=done,
                iteration_cap=None if alpha_stage else self.max_iter,
                steps=self._steps_before + done, objective=objective,
                elapsed=wall - self._started, remaining=remaining, remaining_is_bound=bound)
            self._last, self._last_wall = event, wall
            return event

    def now(self) -> Progress:
        """The last event with its times moved on to now (for a display refreshed between
        records): the elapsed time grows, the time left shrinks by as much."""
        with self._lock:
            last, since = self._last, self._clock() - self._last_wall
        if last.final:
            return last
        remaining = None if last.remaining is None else max(0.0, last.remaining - since)
        return replace(last, elapsed=last.elapsed + since, remaining=remaining)

    def _steps(self, iteration: int) -> int:
        stage = self._stage
        return self._steps_before + (0 if stage is None else iteration - stage.first_iteration)

    def _new_stage(self, key: tuple[str, int | None], alpha_stage: bool, final_solve: bool,
                   iteration: int, wall: float, points_at_most: Any) -> None:
        old = self._stage
        if old is not None:
            self._steps_before += old.history[-1][0] - old.first_iteration if old.history else 0
            if old.name == "alpha search":
                self._point_seconds.append(wall - old.first_wall)
        if alpha_stage:
            self._searched = True
            self._point = self._point + 1 if key[1] is None else key[1]
            if points_at_most is not None:
                self._points_at_most = int(points_at_most)
            name = "alpha search"
        elif self._searched or final_solve:
            name = "final solve"
        else:
            name = key[0] or "solve"
        self._stage = _Stage(name, key, iteration, wall, [])

    def _points(self) -> int | None:
        at_most = self._points_at_most or self.alpha_points  # the records' bound first
        if at_most is None:
            return None
        return max(at_most, self._point)  # a second (weighted) search goes on

    # -- the time left ---------------------------------------------------------------------
    def _remaining(self, stage: _Stage, done: int, wall: float,
                   alpha_stage: bool) -> tuple[float | None, bool]:
        if alpha_stage:
            return self._search_left(stage, wall), False
        rate = _rate(stage.history)
        if rate is None:
            return None, False
        left = max(0, self.max_iter - done)
        by_rule = self._iterations_by_rule(stage)
        bound = by_rule is None
        iterations = left if by_rule is None else min(left, by_rule)
        seconds = iterations * rate
        if self.time_budget is not None:
            seconds = min(seconds, max(0.0, self.time_budget - (wall - self._started)))
        return seconds, bound

    def _search_left(self, stage: _Stage, wall: float) -> float | None:
        if not self._point_seconds:
            return None  # no point has finished: nothing measured yet
        mean = sum(self._point_seconds) / len(self._point_seconds)
        points = self._points() or self._point
        this = max(0.0, mean - (wall - stage.first_wall))
        return this + (points - self._point) * mean + mean  # the rest, then the final solve

    def _iterations_by_rule(self, stage: _Stage) -> float | None:
        return iterations_to_stop(stage.history, stage.first_iteration, tol=self.tol,
                                  tol_mode=self.tol_mode, max_iter=self.max_iter)


def _rate(history: list[tuple[int, float, float | None, float | None]]) -> float | None:
    """Wall seconds per iteration over the solve's records so far."""
    if len(history) < 2:
        return None
    (k0, t0, _, _), (k1, t1, _, _) = history[0], history[-1]
    return (t1 - t0) / (k1 - k0) if k1 > k0 else None


def _number(value: Any) -> float | None:
    """Sample 0 of a per-sample tensor/array (or a plain number), None when not finite."""
    try:
        number = float(value[0]) if hasattr(value, "__getitem__") else float(value)
    except (TypeError, ValueError, IndexError):
        return None
    return number if math.isfinite(number) else None


def _change(record: Any) -> float | None:
    """The relative/absolute stop modes' measure: the larger change of x and of the dual."""
    values = [_number(getattr(record, name, None))
              for name in ("primal_residual", "dual_residual")]
    finite = [v for v in values if v is not None]
    return max(finite) if finite else None


def _alpha_of(text: str) -> float | None:
    return _number([text.rsplit(":", 1)[1]]) if ":" in text else None  # "alpha search: A"


class CountProgress:
    """Progress over a known number of like items (a sweep's cells): done k of n, the time
    so far, and the time left as the mean time of the items run here times those left
    ("≈"; nothing before the first item ends). Items done before (a resumed sweep) are
    counted as done but not timed. Thread-safe like :class:`ProgressTracker`."""

    def __init__(self, total: int, noun: str = "cell",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.noun, self._clock = int(total), noun, clock
        self._started = clock()
        self._lock = threading.Lock()
        self.done, self._skipped, self._timed_since = 0, 0, self._started
        self.detail = ""
        self._last_wall = self._started

    def update(self, done: int, detail: str = "") -> None:
        """``done`` items are finished (absolute); the first call sets those done before."""
        with self._lock:
            if detail.endswith("already done"):  # the first call: the cells found done
                self._skipped, self._timed_since = int(done), self._clock()
                detail = detail if done else ""
            self.done, self.detail, self._last_wall = int(done), detail, self._clock()

    def text(self) -> str:
        with self._lock:
            now = self._clock()
            ran = self.done - self._skipped
            left = self.total - self.done
            if self.done >= self.total:
                line = f"all {self.total} {self.noun}s done, writing the summary"
            else:
                line = f"{self.noun} {self.done + 1} of {self.total}"
                line += f" (last: {self.detail})" if self.detail else ""
            line += f" · {duration(now - self._started)}"
            if ran > 0 and left > 0:
                mean = (self._last_wall - self._timed_since) / ran
                line += f", ≈ {duration(max(0.0, mean * left - (now - self._last_wall)))} left"
            return line


__all__ = ["CountProgress", "Progress", "ProgressTracker", "duration"]
