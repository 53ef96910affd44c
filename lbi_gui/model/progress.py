"""What a running inversion has done and has left, in words: the one adapter from the
engine's iterate records (their ``stage`` names, iterations and times, as the curve store
keeps them) to the window's status line and progress bar.

Why one place: the engine names stages in free text today ("alpha search: 0.0123", "layer
2/3", the chosen α's solve unnamed until its last record); when it reports stages as typed
events, only this module changes. Qt-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lbi_gui.model.runs import CurveStore

#: At most this many solves of the α search (the engine's discrepancy search,
#: ``lbi_engine.solvers.alpha.residual_path.MAX_POINTS``).
MAX_ALPHA_TRIALS = 10

_SEARCH = re.compile(r"^alpha (search|path): (?P<alpha>\S+)")
_LAYER = re.compile(r"^layer (?P<i>\d+)/(?P<n>\d+)")


@dataclass(frozen=True)
class RunProgress:
    """The status line's parts and the progress bar's state for one moment of a run."""

    stage: str  # "starting", "α trial 3 of ≤ 10 (α = 0.0123)", "final solve", "layer 2 of 3"
    iteration: int
    elapsed: float
    #: Seconds left at most (the iteration budget at the current speed); None: unknown.
    left_at_most: float | None
    #: Fraction done for the progress bar; None: unknown (a run that stops by tolerance).
    fraction: float | None

    def text(self) -> str:
        """"α trial 3 of ≤ 10 (α = 0.0123) · k = 240 · 3.1 s · ≤ 12 s left"."""
        parts = [self.stage, f"k = {self.iteration}", f"{self.elapsed:.1f} s", self.left_text()]
        return " · ".join(p for p in parts if p)

    def left_text(self) -> str:
        """"≤ 12 s left" ("" when unknown)."""
        if self.left_at_most is None:
            return ""
        return f"≤ {_duration(self.left_at_most)} left"


def run_progress(curves: CurveStore, max_iter: int, tol: float | None,
                 rate: float) -> RunProgress:
    """The progress of the run whose points are in ``curves``: ``max_iter`` its iteration
    budget, ``tol`` its tolerance (> 0: it may stop before the budget), ``rate`` its speed
    in iterations per second (0: not measured yet)."""
    if not len(curves):
        return RunProgress("starting", 0, 0.0, None, 0.0)
    arrays = curves.arrays()
    iteration, elapsed = int(arrays["iteration"][-1]), float(arrays["elapsed"][-1])
    names = [name for _start, name in curves.stages]
    trials = [m.group("alpha") for n in names if (m := _SEARCH.match(n))]
    current = names[-1] if names else ""
    searching = _SEARCH.match(current)
    layer = _LAYER.match(current)
    if searching:
        stage = f"α trial {len(trials)} of ≤ {MAX_ALPHA_TRIALS} (α = {searching.group('alpha')})"
    elif layer:
        stage = f"layer {layer.group('i')} of {layer.group('n')}"
    elif trials:
        stage = f"final solve ({len(trials)} α trials before)"
    else:
        stage = "solving"
    budget_left = max(0, max_iter - iteration)
    left = budget_left / rate if rate > 0 and not searching else None
    if searching and rate > 0:  # each later trial and the final solve at most the budget
        left = (MAX_ALPHA_TRIALS - len(trials) + 1) * max_iter / rate
    stops_early = bool(tol) or bool(searching) or bool(trials)
    fraction = None if stops_early else min(1.0, iteration / max(1, max_iter))
    return RunProgress(stage, iteration, elapsed, left, fraction)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
