"""The progress events (lbi_engine/results/progress.py) and the live line of `lbi invert`:
shown on a terminal (driven here through a pseudo-terminal), absent when piped or -q."""

from __future__ import annotations

import math
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from lbi_engine.cli import main
from lbi_engine.results.advice import run_advice
from lbi_engine.results.progress import CountProgress, ProgressTracker, duration
from lbi_engine.results.run_metrics import RunMetrics
from lbi_engine.solvers.alpha.time_split import position
from lbi_engine.solvers.choice import RunPosition


@dataclass
class Rec:
    """The fields of an IterateRecord the tracker reads."""

    iteration: int
    objective: list[float]
    stage: str = ""
    final: bool = False
    primal_residual: list[float] = field(default_factory=lambda: [float("inf")])
    dual_residual: list[float] = field(default_factory=lambda: [float("inf")])
    position: RunPosition | None = None


def searching(point: int, at_most: int) -> RunPosition:
    """The position of an alpha search record (solvers/alpha/time_split.position)."""
    return position(point, at_most)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_relative_mode_estimate_is_the_power_law_extrapolation() -> None:
    """||dx||/||x|| = 5 / k: the tol 1e-3 stop is at k = 5000; at k = 500 with 2 ms per
    iteration, 4500 iterations (9 s) are left."""
    clock = Clock()
    tracker = ProgressTracker(max_iter=10_000, tol=1e-3, tol_mode="relative", clock=clock)
    event = None
    for k in range(0, 501, 50):
        clock.t = 1.0 + 0.002 * k
        event = tracker.update(Rec(k, [1.0], primal_residual=[5.0 / max(k, 1)]))
    assert event is not None and event.stage == "solve" and event.iteration == 500
    assert event.remaining == pytest.approx(4500 * 0.002, rel=1e-6)
    assert not event.remaining_is_bound and "≈ 9 s left" in event.text()
    clock.t += 4.0  # between records the clock moves on and the time left shrinks by as much
    later = tracker.now()
    assert later.remaining == pytest.approx(5.0, rel=1e-6)
    assert later.elapsed == pytest.approx(event.elapsed + 4.0)


def test_objective_mode_estimate_matches_the_rule_in_closed_form() -> None:
    """E_k = 1 + 1/k: the spread since the middle record is (2/k - 1/k) / (1 + 1/k) = 1/(k+1),
    so the objective rule at tol 1e-3 stops at k = 999."""
    clock = Clock()
    tracker = ProgressTracker(max_iter=10_000, tol=1e-3, tol_mode="objective", clock=clock)
    for k in range(0, 201, 10):
        clock.t = 0.01 * k
        event = tracker.update(Rec(k, [1.0 + 1.0 / max(k, 1)]))
    left = event.remaining / 0.01  # iterations
    assert left == pytest.approx(999 - 200, rel=0.05)


def test_a_measure_that_does_not_fall_leaves_only_the_cap_as_a_bound() -> None:
    clock = Clock()
    tracker = ProgressTracker(max_iter=1000, tol=1e-6, tol_mode="relative", clock=clock)
    for k in range(0, 101, 10):
        clock.t = 0.01 * k
        event = tracker.update(Rec(k, [1.0], primal_residual=[0.5]))
    assert event.remaining_is_bound and event.remaining == pytest.approx(900 * 0.01)
    assert "≤ 9 s left" in event.text()


def test_nothing_is_estimated_before_anything_is_timed() -> None:
    clock = Clock()
    tracker = ProgressTracker(max_iter=100, tol=1e-3, tol_mode="objective", clock=clock)
    clock.t = 3.0
    assert tracker.now().text() == "start · 3 s"
    tracker.starting("loading the network")
    clock.t = 4.0
    assert tracker.now().text() == "start: loading the network · 4 s"
    event = tracker.update(Rec(0, [2.0]))
    assert event.remaining is None and "left" not in event.text()


def test_alpha_search_points_then_the_final_solve() -> None:
    """Points are counted by the records' stage text; the search's time left is the mean
    point time times the points that may remain, plus one for the final solve."""
    clock = Clock()
    tracker = ProgressTracker(max_iter=500, tol=1e-4, tol_mode="objective", alpha_points=10,
                              clock=clock)
    for k in (0, 5, 10):
        clock.t = 0.1 * k  # point 1 takes 1 s (its next point starts at t = 1)
        event = tracker.update(Rec(k, [3.0], stage="alpha search: 0.0138"))
    assert event.stage_text() == "α search point 1 of ≤ 10 (α 0.014)"
    assert event.remaining is None
    clock.t = 1.0
    event = tracker.update(Rec(10, [2.0], stage="alpha search: 0.0106"))
    assert event.point == 2 and event.alpha == pytest.approx(0.0106)
    assert event.remaining == pytest.approx(1.0 + 8 * 1.0 + 1.0)
    clock.t = 1.5
    tracker.update(Rec(20, [1.6], stage="alpha search: 0.0106"))
    clock.t = 2.0  # the final solve continues the count from the point it starts at
    event = tracker.update(Rec(20, [1.5], stage=""))
    assert event.stage == "final solve" and event.iteration == 0 and event.steps == 20
    assert event.iteration_cap == 500
    done = tracker.update(Rec(40, [1.4], stage="alpha 0.0106 (discrepancy)", final=True))
    assert done.final and done.steps == 40 and done.remaining == 0.0


def test_the_records_typed_stage_beats_the_stage_text() -> None:
    """The search's own bound (4, not the tracker's 10) and point numbers come from the
    records' position; a raised search that counts again from 1 at the same alpha is a new
    point; the final solve is named by its position even with no search text before it."""
    clock = Clock()
    tracker = ProgressTracker(max_iter=500, tol=1e-4, tol_mode="objective", alpha_points=10,
                              clock=clock)
    for k, t, point in ((0, 0.0, 1), (10, 1.0, 1), (10, 2.0, 2), (15, 3.0, 1)):
        clock.t = t
        event = tracker.update(Rec(k, [3.0], stage="alpha search: 0.01",
                                   position=searching(point, 4)))
    assert event.stage_text() == "α search point 1 of ≤ 4 (α 0.01)"
    # two points finished, 2 s and 1 s: the mean (1.5 s) for this point, 3 more, the final
    assert event.remaining == pytest.approx(1.5 + 3 * 1.5 + 1.5)
    clock.t = 4.0
    event = tracker.update(Rec(20, [2.0], position=RunPosition("final solve")))
    assert event.stage_text() == "final solve" and event.point is None
    plain = ProgressTracker(max_iter=50, tol=0.0, tol_mode="objective", clock=clock)
    assert plain.update(Rec(0, [1.0], position=RunPosition("final solve"))).stage == \
        "final solve"


def test_count_progress_times_only_the_items_run_here() -> None:
    clock = Clock()
    count = CountProgress(10, clock=clock)
    count.update(4, "4 cell(s) already done")
    clock.t = 6.0
    count.update(6, "std 0.05, auto, alpha auto")  # 2 cells in 6 s: 3 s each, 4 left
    assert count.text() == "cell 7 of 10 (last: std 0.05, auto, alpha auto) · 6 s, ≈ 12 s left"
    clock.t = 7.0  # a second into cell 7: a second less to go
    assert count.text().endswith("7 s, ≈ 11 s left")
    count.update(10, "std 0.05, auto, alpha 0.1")
    assert count.text().startswith("all 10 cells done, writing the summary · ")
    fresh = CountProgress(3, clock=clock)
    fresh.update(0, "0 cell(s) already done")
    assert fresh.text() == "cell 1 of 3 · 0 s"  # its own clock starts at its making


def test_duration_and_advice_words() -> None:
    """The summary's notes are the window's concerns (results.verdict.judge) with flags."""
    assert (duration(5.2), duration(185), duration(3720)) == ("5 s", "3 min 05 s", "1 h 02 min")
    plain = np.linspace(0.0, 1.0, 16).reshape(4, 4)
    capped = run_advice(RunMetrics(stop_reason="max_iterations", alpha=0.1), 2000, x=plain,
                        data_range=1.0)
    assert len(capped) == 1 and "iteration cap (2000)" in capped[0]
    assert "--max-iter 8000" in capped[0]
    missed = run_advice(RunMetrics(stop_reason="tolerance", alpha=1e-4, alpha_target=1.0,
                                   discrepancy=1.5, alpha_path=[{"alpha": 1e-4}]), 2000)
    assert len(missed) == 1
    assert "50% above its target 1" in missed[0] and "--alphas log:" in missed[0]
    floor = run_advice(RunMetrics(stop_reason="finished", alpha=1e-5, alpha_target=0.678,
                                  alpha_rule="continuation: floor", discrepancy=1.5,
                                  alpha_path=[{"alpha": 1e-5}]), 2000)
    assert len(floor) == 1 and "stopped falling at 2.2x its target 0.678" in floor[0]
    assert "None" not in floor[0] and floor[0].endswith("(`lbi sweep --alphas log:A/10:A*10:5`)")
    # without a truth, a span of 1 % of the display range is flat; with one, the contrast
    flat = run_advice(RunMetrics(stop_reason="tolerance", alpha=3.0), 2000, x=0.01 * plain,
                      data_range=1.0)
    assert len(flat) == 1 and "flat result: its values span 0.01" in flat[0]
    assert "--alpha 0.3 (ten times smaller)" in flat[0]
    faint = run_advice(RunMetrics(stop_reason="tolerance", alpha=3.0), 2000, x=0.2 * plain,
                       truth=plain, data_range=1.0)
    assert len(faint) == 1 and "20% of the ground truth's contrast" in faint[0]
    assert run_advice(RunMetrics(stop_reason="tolerance", alpha=0.01, alpha_target=1.0,
                                 discrepancy=1.02, alpha_path=[{"alpha": 0.01}]), 2000,
                      x=plain, truth=plain, data_range=1.0) == []


# ---------------------------------------------------------------------------------------------
# the command line

RUN = ("invert", "--network", "mnist-cnn-ae", "--sample", "3", "--regulariser", "tv")


def test_invert_on_a_terminal_shows_stages_and_an_estimate(tmp_path: Path, monkeypatch) -> None:
    """Through a pseudo-terminal: the alpha search's points, an estimate, the final solve;
    the line is erased at the end and the summary follows on stdout."""
    master, slave = os.openpty()
    terminal = os.fdopen(slave, "w", encoding="utf-8", buffering=1)
    chunks: list[bytes] = []

    def drain() -> None:  # a pty holds a few KB: read while the run writes
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(sys, "stderr", terminal)
    try:
        code = main([*RUN, "--out", str(tmp_path / "run")])
    finally:
        monkeypatch.undo()
        terminal.close()
        reader.join(timeout=10)
        os.close(master)
    shown = b"".join(chunks).decode("utf-8")
    assert code == 0
    # each step of the start is drawn at once, however fast the network loads
    assert "start: loading the network and the data · " in shown
    assert "start: first alpha · " in shown
    assert "α search point 1 of ≤ 10" in shown and "α search point 2 of ≤ 10" in shown
    assert "≈ " in shown and " left" in shown  # an estimate of the time left
    assert "final solve" in shown and "it 0/10000" in shown
    assert "\x1b[2K" in shown  # redrawn in place by rich, not new lines


def test_quiet_prints_nothing_and_piped_output_has_no_progress(tmp_path: Path, cli) -> None:
    """stderr captured (a pipe, as in a script or CI): no progress line, no escape codes;
    -q: nothing at all on a run without problems, and still the one-line error on bad
    input (warnings about the input still show: tests/cli/test_warnings.py)."""
    code, out, err = cli(*RUN, "--out", tmp_path / "a")
    assert code == 0 and err == ""
    assert out.startswith("mnist-cnn-ae: joint on cpu, tv, alpha=") and "\x1b" not in out
    code, out, err = cli(*RUN, "--out", tmp_path / "b", "-q")
    assert (code, out, err) == (0, "", "")
    assert (tmp_path / "b" / "result.json").is_file()
    code, out, err = cli(*RUN, "--out", tmp_path / "c", "-q", "--max-iter", "0")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--max-iter" in err


def test_linear_convergence_is_extrapolated_as_an_exponential() -> None:
    """||dx||/||x|| = exp(-k/100): the tol 1e-6 stop is at k = 100 ln(1e6) = 1381.6; the
    exponential fits these records exactly, so it is the model chosen over the power law."""
    clock = Clock()
    tracker = ProgressTracker(max_iter=10_000, tol=1e-6, tol_mode="relative", clock=clock)
    for k in range(0, 401, 10):
        clock.t = 0.001 * k
        event = tracker.update(Rec(k, [1.0], primal_residual=[math.exp(-k / 100)]))
    assert event.remaining / 0.001 == pytest.approx(100 * math.log(1e6) - 400, rel=1e-6)


def test_summary_says_when_the_iteration_cap_ended_the_run(tmp_path: Path, cli) -> None:
    code, out, err = cli(*RUN, "--alpha", "1e-2", "--max-iter", "5", "--out", tmp_path / "r")
    assert code == 0 and err == ""
    assert "5 iterations (max_iterations)" in out
    assert "  note: stopped by the iteration cap (5) before the tolerance: try --max-iter" in out
    assert "--max-iter 20" in out


def test_summary_says_when_the_image_is_flat(tmp_path: Path, cli) -> None:
    """alpha 1e3 with TV leaves a constant image: the summary says so, with what to try."""
    code, out, _ = cli("invert", "--network", "mnist-perceptron-ae", "--sample", "2",
                       "--alpha", "1e3", "--regulariser", "tv", "--max-iter", "300",
                       "--out", tmp_path / "r")
    recon = np.load(tmp_path / "r" / "reconstruction.npy")
    assert code == 0 and float(recon.max() - recon.min()) < 0.02
    assert "  note: flat result: 0% of the ground truth's contrast at α = 1e+03" in out
    assert "try --alpha 100 (ten times smaller)" in out
