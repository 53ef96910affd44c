"""Closing the window mid-run, 20 times in a row: no crash, no thread left behind."""

from __future__ import annotations

import os

from tests.gui.conftest import wait_iterations


def _os_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def test_close_mid_run_twenty_times(qtbot, make_window) -> None:
    # one warm-up window: torch creates its worker pools once per process
    first = make_window({"max_iter": 100000, "tol": 0.0})
    first.runner.run()
    wait_iterations(qtbot, first, 10)
    first.close()
    assert first.controller.thread.wait(5000)
    baseline = _os_threads()
    for _ in range(20):
        win = make_window({"max_iter": 100000, "tol": 0.0})
        win.runner.run()
        wait_iterations(qtbot, win, 10)
        assert win.controller.running
        win.close()
        assert win.controller.thread.isFinished()
        assert not win.controller.thread.isRunning()
    qtbot.wait(100)
    assert _os_threads() <= baseline + 1
