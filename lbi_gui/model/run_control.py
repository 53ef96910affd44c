"""The rules of running, without Qt: what an edit does to a run, the solver's speed, and the
"run all methods" queue.

Why here: :class:`~lbi_gui.window.controller.RunController` is a QObject that talks to a backend
and emits signals; the decisions it takes (does changing α restart the run warm? does a new
network stop it?) and the bookkeeping it keeps are plain logic, tested here without a window.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lbi_gui.params import HOT_KEYS, PROBLEM_KEYS

#: Settings a running solve may take on without starting over (the run keeps its budget).
RUN_KEYS = frozenset({"max_iter", "tol", "tol_mode", "report_every", "threads", "time_budget"})
#: Settings that change the displayed problem when no run is going (new noise draw too); the
#: feature prior is read and checked against the network when the problem is prepared, so a
#: prior that does not fit is reported as it is chosen.
PREPARE_KEYS = frozenset({"noise_std", "seed", "feature_prior"})


def changed_keys(old: Mapping[str, Any], new: Mapping[str, Any]) -> set[str]:
    return {k for k in new if old.get(k) != new.get(k)}


def classify_change(old: Mapping[str, Any], new: Mapping[str, Any], *, running: bool) -> str:
    """What an edit from ``old`` to ``new`` asks of the solver.

    * "stop": a run is going and the problem changed (network, data…): stop it and prepare
      the new problem.
    * "restart": a run is going and only settings the solve can take on changed, among them
      a hot one (α, regulariser…): restart it warm.
    * "prepare": no run is going and the displayed problem changed.
    * "none": nothing for the solver (e.g. only max_iter changed during a run).
    """
    changed = changed_keys(old, new)
    if not changed:
        return "none"
    if running and changed & PROBLEM_KEYS:
        return "stop"
    if running and changed <= (HOT_KEYS | RUN_KEYS):
        return "restart" if changed & HOT_KEYS else "none"
    if not running and changed & (PROBLEM_KEYS | PREPARE_KEYS):
        return "prepare"
    return "none"


class SpeedMeter:
    """Iterations per second from (iteration, elapsed seconds) points of one run.

    The rate is taken over windows of at least ``window_s`` seconds, so a burst of points
    that arrived together does not read as an infinite speed.
    """

    def __init__(self, window_s: float = 0.2) -> None:
        self.window_s = window_s
        self.rate = 0.0
        self._mark: tuple[float, float] | None = None

    def reset(self) -> None:
        self.rate, self._mark = 0.0, None

    def update(self, iteration: float, elapsed: float) -> float:
        it, el = float(iteration), float(elapsed)
        if self._mark is None:
            self._mark = (it, el)
            if el > 0:
                self.rate = it / el
        elif el > self._mark[1] + self.window_s:
            self.rate = (it - self._mark[0]) / (el - self._mark[1])
            self._mark = (it, el)
        return self.rate


@dataclass
class RunQueue:
    """"Run all methods": the same request with each method, one after another."""

    pending: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    errors: list[Any] = field(default_factory=list)  # what failed, in order
    active: bool = False

    def start(self, request: Mapping[str, Any], methods: list[str]) -> None:
        self.pending = [dict(request, method=m) for m in methods]
        self.total, self.errors, self.active = len(self.pending), [], True

    def next(self) -> tuple[int, dict[str, Any]] | None:
        """The next request and its number (1-based); None when none is left."""
        if not self.pending:
            return None
        request = self.pending.pop(0)
        return self.total - len(self.pending), request

    def clear(self) -> None:
        """No more methods start (the running one, if any, ends as it is told)."""
        self.pending.clear()

    def finish(self) -> list[Any] | None:
        """End an active queue once nothing is pending: its errors (None: not active)."""
        if not self.active or self.pending:
            return None
        self.active = False
        errors, self.errors = self.errors, []
        return errors
