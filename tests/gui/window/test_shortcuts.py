"""Keyboard and mouse paths through the window on the real engine: Space (pause / resume),
a mouse drag of the α log slider (value shown, request, one warm restart mid-run) and
Ctrl+Q during a run (the window closes, the solver's job ends, no thread is left running).

Only the window's public surface is used (actions, widgets, status line, run table, the
controller's ``thread`` and the fixtures' wait helpers), so the tests hold whichever backend
the controller drives.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from PySide6 import QtCore, QtGui, QtWidgets

from tests.gui.conftest import wait_idle, wait_iterations

LONG = {"max_iter": 100000, "tol": 0.0, "report_every": 5}
Key = QtCore.Qt.Key
CTRL = QtCore.Qt.KeyboardModifier.ControlModifier


def _focus_window(win: Any) -> None:
    """Keys go where a user's would: the active window, focus on the image (not an editor)."""
    win.activateWindow()
    win.image_grid.setFocus()


def _iteration_shown(win: Any) -> int:
    """k from the status line ("k = 35" or "k = 35 (layer 1/2)")."""
    return int(win.status.iteration.text().split("=")[1].split()[0])


def test_space_pauses_and_resumes_a_run_and_is_inert_when_idle(qtbot, make_window) -> None:
    win = make_window(LONG)
    pause = win.actions_.pause
    assert pause.shortcut() == QtGui.QKeySequence(Key.Key_Space)
    _focus_window(win)
    # idle: Space is bound to Pause/Resume, which is disabled; it does not start a run
    qtbot.keyClick(win, Key.Key_Space)
    qtbot.wait(300)
    assert not pause.isEnabled() and not win.actions_.stop.isEnabled()
    assert win.status.state.text() == "Ready" and win.run_table.runs == []
    qtbot.keyClick(win, Key.Key_R, CTRL)
    wait_iterations(qtbot, win, 10)
    assert pause.isEnabled() and pause.text() == "Pause"
    qtbot.keyClick(win, Key.Key_Space)
    qtbot.waitUntil(lambda: win.status.state.text() == "Paused", timeout=5000)
    assert pause.text() == "Resume"
    qtbot.wait(300)  # an update already on its way may still arrive
    k = _iteration_shown(win)
    qtbot.wait(600)
    assert _iteration_shown(win) == k  # paused: no iteration is shown any more
    qtbot.keyClick(win, Key.Key_Space)
    qtbot.waitUntil(lambda: win.status.state.text() == "Running", timeout=5000)
    assert pause.text() == "Pause"
    qtbot.waitUntil(lambda: _iteration_shown(win) >= k + 20, timeout=30000)
    win.runner.finish_now()
    wait_idle(qtbot, win)
    assert len(win.run_table.runs) == 1  # paused and resumed: still the one run
    assert win.run_table.runs[0].stop_reason == "finished by user"


def _drag_slider(qtbot: Any, slider: QtWidgets.QSlider, dx: int, steps: int = 12) -> None:
    """Press on the handle, move right by ``dx`` pixels in ``steps``, release (a user's drag)."""
    opt = QtWidgets.QStyleOptionSlider()
    slider.initStyleOption(opt)
    handle = slider.style().subControlRect(QtWidgets.QStyle.ComplexControl.CC_Slider, opt,
                                           QtWidgets.QStyle.SubControl.SC_SliderHandle, slider)
    start = handle.center()
    left = QtCore.Qt.MouseButton.LeftButton
    qtbot.mousePress(slider, left, pos=start)
    assert slider.isSliderDown(), "the press must grab the handle"
    for i in range(1, steps + 1):
        qtbot.mouseMove(slider, start + QtCore.QPoint(round(dx * i / steps), 0))
    qtbot.mouseRelease(slider, left, pos=start + QtCore.QPoint(dx, 0))
    assert not slider.isSliderDown()


def _alpha_at(pos: int) -> float:
    """α for a slider position, computed here: 10^(-8 + 11 pos / 1000) shown to 3 digits
    (the slider spans 1e-8 .. 1e3)."""
    return float(f"{10 ** (-8 + 11 * pos / 1000):.3g}")


def test_dragging_the_alpha_slider_sets_alpha_and_warm_restarts_once(qtbot,
                                                                      make_window) -> None:
    win = make_window(LONG)
    control = win.reg_panel.alpha
    slider = control.slider
    alpha0 = win.params.current_request()["alpha"]
    # idle: the drag sets α (shown in the spin box, taken by the next request), no run starts
    before = slider.value()
    _drag_slider(qtbot, slider, -slider.width() // 8)
    assert slider.value() < before
    assert control.spin.value() == pytest.approx(_alpha_at(slider.value()))
    assert win.params.current_request()["alpha"] == pytest.approx(_alpha_at(slider.value()))
    qtbot.wait(400)  # past the debounce: a change while idle starts nothing
    assert not win.actions_.stop.isEnabled() and win.run_table.runs == []
    assert win.params.current_request()["alpha"] != alpha0
    # during a run: one drag (many moves) is one warm restart of the same run
    win.runner.run()
    wait_iterations(qtbot, win, 20)
    _drag_slider(qtbot, slider, slider.width() // 5)
    alpha = _alpha_at(slider.value())
    assert control.spin.value() == pytest.approx(alpha)
    assert control.spin.text() == control.spin.textFromValue(alpha)
    plots = len(win.curves.plots)
    qtbot.waitUntil(lambda: len(win.curves.restart_lines) == plots, timeout=20000)
    message = win.statusBar().currentMessage()
    assert "Warm restart" in message and "α" in message, message
    k_restart = win.curves.restart_lines[0][1].value()
    assert k_restart >= 20  # the iteration count goes on: warm, not a fresh start
    qtbot.waitUntil(lambda: _iteration_shown(win) >= k_restart + 10, timeout=30000)
    assert len(win.curves.restart_lines) == plots  # debounced: still exactly one restart
    win.runner.finish_now()
    wait_idle(qtbot, win)
    assert len(win.run_table.runs) == 1
    run = win.run_table.runs[0]
    assert run.request["alpha"] == pytest.approx(alpha)
    assert run.iterations > k_restart and math.isfinite(run.metrics.objective)


def test_ctrl_q_during_a_run_closes_cleanly_and_ends_the_solver(qtbot, make_window,
                                                               qtlog) -> None:
    win = make_window(LONG)
    win.runner.run()
    wait_iterations(qtbot, win, 20)
    assert win.actions_.quit.shortcut() == QtGui.QKeySequence("Ctrl+Q")
    thread = win.controller.thread
    _focus_window(win)
    qtbot.keyClick(win, Key.Key_Q, CTRL)
    assert not win.isVisible()  # closing stops the run and waits for it before returning
    assert thread.wait(10000) and thread.isFinished()
    assert not any(t.isRunning() for t in win.findChildren(QtCore.QThread))
    qtbot.wait(200)  # anything the solver still had queued is delivered (and ignored)
    assert win.run_table.runs == []  # quitting is not "finish now": nothing was kept
    bad = [r.message for r in qtlog.records
           if "Destroyed while thread" in r.message or "QThread" in r.message]
    assert bad == []
