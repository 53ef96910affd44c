"""Stop, Pause/Resume, Finish now and hot changes on the real engine (short runs)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.gui.conftest import wait_idle, wait_iterations

LONG = {"max_iter": 100000, "tol": 0.0, "report_every": 5}


def test_stop_mid_run_is_prompt_and_discards(qtbot, make_window) -> None:
    win = make_window(LONG)
    win.runner.run()
    wait_iterations(qtbot, win, 20)
    win.runner.stop()
    wait_idle(qtbot, win, timeout=10000)  # latency: test_cancel_latency.py (-m timing)
    assert win.run_table.runs == []
    assert win.image_grid.iterate is not None  # the last iterate stays on screen
    assert win.actions_.run.isEnabled() and not win.actions_.stop.isEnabled()


def test_pause_and_resume(qtbot, make_window) -> None:
    win = make_window(LONG)
    win.runner.run()
    wait_iterations(qtbot, win, 10)
    win.runner.toggle_pause()
    qtbot.wait(300)
    k = win.controller.curves.last_iteration
    qtbot.wait(500)
    assert win.controller.curves.last_iteration == k
    assert win.status.state.text() == "Paused"
    win.runner.toggle_pause()
    wait_iterations(qtbot, win, k + 20)
    win.runner.finish_now()
    wait_idle(qtbot, win)
    assert win.run_table.runs[-1].stop_reason == "finished by user"


def test_alpha_method_and_noise_changes_restart_warm(qtbot, make_window) -> None:
    win = make_window(LONG)
    delta_before = win.view.info.delta
    win.runner.run()
    wait_iterations(qtbot, win, 20)
    win.reg_panel.alpha.spin.setValue(0.02)  # as a user types it: switches Auto α off
    qtbot.waitUntil(lambda: len(win.controller.curves.restarts) == 1, timeout=20000)
    k1 = win.controller.curves.restarts[0][0]
    assert k1 >= 20
    wait_iterations(qtbot, win, k1 + 10)
    win.solver_panel.switch.click()  # joint -> layer-wise, one click
    qtbot.waitUntil(lambda: len(win.controller.curves.restarts) == 2, timeout=20000)
    k2 = win.controller.curves.restarts[1][0]
    wait_iterations(qtbot, win, k2 + 5)
    win.noise_panel.std.setValue(0.2)
    win.noise_panel._emit("noise_std")
    qtbot.waitUntil(lambda: len(win.controller.curves.restarts) == 3, timeout=20000)
    qtbot.waitUntil(lambda: win.view.info.delta != delta_before, timeout=20000)
    win.runner.finish_now()
    wait_idle(qtbot, win)
    store = win.controller.curves
    its = store.arrays()["iteration"]
    assert np.all(np.diff(its) >= 0)  # iteration count continues through every restart
    assert [what.split(" ")[0] for _, what in store.restarts] == ["α", "method", "noise"]
    assert k1 < k2 <= store.restarts[2][0] <= its[-1]
    run = win.run_table.runs[-1]
    assert run.request["method"] == "layerwise"
    assert run.request["alpha"] == pytest.approx(0.02)
    assert run.request["noise_std"] == pytest.approx(0.2)
    # each restart is a vertical line on every plot
    assert len(win.curves.restart_lines) == 3 * len(win.curves.plots)
    positions = sorted({line.value() for _plot, line in win.curves.restart_lines})
    assert positions == [k for k, _ in store.restarts]
