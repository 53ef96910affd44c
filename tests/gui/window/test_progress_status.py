"""During a run the status line says the stage, k, the time and how much is left (the
engine's estimate, as `lbi invert` shows it); the bar is busy (not k / max-iter) for a run
that stops by tolerance; a new run clears the last run's reason and progress."""

from __future__ import annotations

from tests.gui.conftest import wait_idle, wait_iterations


def test_a_new_run_clears_the_last_reason_and_shows_its_progress(qtbot, fake_engine,
                                                                 make_window) -> None:
    fake_engine(delay=0.002)
    win = make_window({"network": "fake-net", "max_iter": 5000, "tol": 1e-6,
                       "tol_mode": "relative"})
    win.runner.run()
    wait_iterations(qtbot, win, 50)
    win.runner.stop()
    wait_idle(qtbot, win)
    assert win.status.reason.text() == "stopped: stopped by user"
    win.runner.run()
    assert win.status.reason.text() == "running"  # not the last run's "stopped by user"
    assert (win.status.iteration.text(), win.status.time.text()) == ("k = 0 · start", "0.0 s")
    wait_iterations(qtbot, win, 100)
    qtbot.waitUntil(lambda: "left" in win.status.time.text(), timeout=5000)
    assert win.status.iteration.text().endswith(" · solve")
    # the fake solver's change of x falls geometrically: an estimate of the stop by tol
    elapsed, left = win.status.time.text().split(" · ")
    assert elapsed.endswith(" s") and left.startswith("≈ ") and left.endswith(" s left")
    assert win.status.progress.maximum() == 0  # busy: the run may stop by its tolerance
    win.runner.finish_now()
    wait_idle(qtbot, win)
    assert win.status.progress.maximum() == 1000 and win.status.progress.value() == 1000
    assert "left" not in win.status.time.text()


def test_a_run_without_tolerance_fills_the_bar_by_iterations(qtbot, fake_engine,
                                                             make_window) -> None:
    fake_engine(delay=0.002)
    win = make_window({"network": "fake-net", "max_iter": 4000, "tol": 0.0})
    win.runner.run()
    wait_iterations(qtbot, win, 200)
    qtbot.waitUntil(lambda: win.status.progress.value() > 0, timeout=5000)
    assert win.status.progress.maximum() == 1000
    k = win.controller.curves.last_iteration
    assert 0 < win.status.progress.value() <= round(1000 * (k + 200) / 4000)
    win.runner.stop()
    wait_idle(qtbot, win)
