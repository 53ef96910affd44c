"""The window's progress (lbi_gui.model.progress): the engine's stage words and time-left
estimate, read from the curve points the run driver makes of the engine's records, and the
same estimate as ``lbi invert`` gives for the same records."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from lbi_engine.results.progress import ProgressTracker
from lbi_engine.solvers.choice import RunPosition
from lbi_gui.engine.run_driver import RunDriver
from lbi_gui.model.progress import RunProgress

SECONDS_PER_ITERATION = 0.01


def _record(k: int, stage: str = "", position: RunPosition | None = None,
            residual: float = math.inf) -> Any:
    """An iterate record as the engine yields it (the fields the run driver reads), made
    at 10 ms per iteration."""
    one = lambda v: np.array([v], dtype=np.float64)  # noqa: E731
    return SimpleNamespace(
        iteration=k, objective=one(1.0 + residual if math.isfinite(residual) else 2.0),
        reg_term=one(0.1), discrepancy=one(1.0), primal_residual=one(residual),
        dual_residual=one(residual / 2), psnr=one(12.0), ssim=one(0.5),
        elapsed=SECONDS_PER_ITERATION * k, stage=stage, bregman_terms=None,
        position=position, final=False)


def _searching(point: int) -> RunPosition:
    return RunPosition("alpha search", point, 6)


def _alpha_run() -> list[Any]:
    """Two points of an alpha search (at most 6), 40 iterations each, then the final solve,
    whose change of x falls as exp(-(k - 80) / 20)."""
    records = [_record(k, "alpha search: 0.1", _searching(1)) for k in range(0, 40, 10)]
    records += [_record(k, "alpha search: 0.03", _searching(2)) for k in range(40, 80, 10)]
    records += [_record(k, "", RunPosition("final solve"), math.exp(-(k - 80) / 20))
                for k in range(80, 201, 10)]
    return records


REQUEST = {"max_iter": 1000, "tol": 1e-4, "tol_mode": "relative", "alpha": "auto"}


def test_the_window_and_the_command_line_give_the_same_estimate_for_the_same_records(
) -> None:
    clock = SimpleNamespace(t=0.0)
    cli = ProgressTracker(max_iter=1000, tol=1e-4, tol_mode="relative", alpha_points=10,
                          clock=lambda: clock.t)
    window = RunProgress(REQUEST)
    seen = []
    for record in _alpha_run():
        clock.t = record.elapsed
        line = cli.update(record)
        window.feed([RunDriver._point(record, record.iteration, 0.0)])
        status = window.status()
        assert status.stage == line.stage_text()
        assert status.remaining == line.remaining and status.left == line.left_text()
        assert status.elapsed == pytest.approx(line.elapsed)
        seen.append(status)
    at_60 = seen[6]  # point 1 took 0.4 s: 0.2 s more of point 2, 4 more, the final solve
    assert at_60.remaining == pytest.approx(0.2 + 4 * 0.4 + 0.4)
    last = seen[-1]  # 1e-4 is reached 20 ln(1e4) iterations into the final solve
    assert last.remaining == pytest.approx((20 * math.log(1e4) - 120) * SECONDS_PER_ITERATION)


def test_the_status_line_says_stage_iteration_time_and_what_is_left() -> None:
    window = RunProgress(REQUEST)
    start = window.status()
    assert (start.iteration_text(), start.time_text()) == ("k = 0 · start", "0.0 s")
    points = [RunDriver._point(r, r.iteration, 0.0) for r in _alpha_run()]
    window.feed(points[:7])
    status = window.status()
    assert status.iteration_text() == "k = 60 · α search point 2 of ≤ 6 (α 0.03)"
    assert status.time_text() == "0.6 s · ≈ 2 s left"
    assert status.fraction is None  # a search ends when it matches: no k / max-iter bar
    window.feed(points[7:])
    assert window.status().iteration_text() == "k = 200 · final solve"
    assert window.status().time_text() == "2.0 s · ≈ 1 s left"


def test_a_plain_run_fills_the_bar_only_when_it_cannot_stop_early() -> None:
    points = [RunDriver._point(_record(k, residual=0.5), k, 0.0) for k in range(0, 251, 50)]
    capped = RunProgress({"max_iter": 1000, "tol": 0.0})
    capped.feed(points)
    status = capped.status()
    assert status.fraction == pytest.approx(0.25) and status.stage == "solve"
    assert status.time_text() == "2.5 s · ≤ 8 s left"  # 750 iterations at 10 ms: the cap
    by_tolerance = RunProgress({"max_iter": 1000, "tol": 1e-6})
    by_tolerance.feed(points)  # the change of x does not fall: only the cap bounds it
    assert by_tolerance.status().fraction is None
    assert by_tolerance.status().left == "≤ 8 s left"


def test_layerwise_stages_and_a_warm_restart_follow_the_run() -> None:
    window = RunProgress({"max_iter": 300, "tol": 0.0})
    window.feed([RunDriver._point(_record(k, "layer 3/3", residual=0.5), k, 0.0)
                 for k in (0, 10, 20)])
    assert window.status().iteration_text() == "k = 20 · layer 3/3"
    assert window.status().remaining == pytest.approx(280 * SECONDS_PER_ITERATION)
    window.follow({"max_iter": 100, "tol": 0.0})  # a warm restart with a smaller budget
    window.feed([RunDriver._point(_record(30, "layer 3/3", residual=0.5), 30, 0.0)])
    assert window.status().remaining == pytest.approx(70 * SECONDS_PER_ITERATION)
