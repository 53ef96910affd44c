"""Defects of issue #20 that a person meets by clicking: incompatible network/data, methods a
network disables, Run during a run, noise controls with measured data, Run all's methods."""

from __future__ import annotations

import numpy as np

from lbi_gui.dialogs import messages
from lbi_gui.params import METHOD_LABELS
from tests.gui.conftest import wait_idle, wait_iterations, wait_ready


def _choose(combo, data) -> None:
    """Pick an entry as a person would (activated, not just setCurrentIndex)."""
    index = combo.findData(data)
    assert index >= 0, data
    combo.setCurrentIndex(index)
    combo.activated.emit(index)


def test_circle_perceptron_reachable_by_clicks(qtbot, make_window) -> None:
    win = make_window({"max_iter": 5})
    errors = len(messages.OPEN_ERRORS)
    _choose(win.network_panel.combo, "circle-perceptron")
    assert win.data_panel.values()["dataset"] == "cartoon"  # a sample the network takes
    win.flush_changes()
    qtbot.waitUntil(lambda: win.info.network_name == "circle-perceptron", timeout=60000)
    wait_ready(qtbot, win)
    assert tuple(win.info.input_shape) == (1, 64, 64) and win.info.truth.shape == (64, 64)
    win.run()
    wait_idle(qtbot, win)
    assert win.run_table.runs[-1].request["network"] == "circle-perceptron"
    # ... and the other way round: MNIST digits bring an MNIST network along
    _choose(win.data_panel.dataset, "mnist")
    assert win.current_request()["network"] in ("mnist-cnn-ae", "mnist-perceptron-ae")
    win.flush_changes()
    qtbot.waitUntil(lambda: win.info.network_name != "circle-perceptron", timeout=60000)
    wait_ready(qtbot, win)
    assert win.info.truth.shape == (28, 28)
    assert len(messages.OPEN_ERRORS) == errors  # never an error dialog


def test_switching_network_resets_a_method_it_disables(qtbot, make_window) -> None:
    win = make_window({"network": "circle-perceptron", "dataset": "cartoon", "split": "disc",
                       "method": "pdhg", "max_iter": 5})
    assert len(win.info.layers) == 1 and win.current_request()["method"] == "pdhg"
    _choose(win.network_panel.combo, "mnist-cnn-ae")
    win.flush_changes()
    qtbot.waitUntil(lambda: win.info.network_name == "mnist-cnn-ae", timeout=60000)
    wait_ready(qtbot, win)
    assert win.current_request()["method"] == "joint"
    win.run()
    wait_idle(qtbot, win)
    assert win.run_table.runs[-1].request["method"] == "joint"


def test_run_during_a_run_asks_first(qtbot, fake_engine, make_window, monkeypatch) -> None:
    fake_engine(delay=0.002)
    win = make_window({"network": "fake-net", "max_iter": 100000, "tol": 0.0})
    answers: list[bool] = []
    monkeypatch.setattr("lbi_gui.window_run.confirm", lambda *a, **k: answers.pop(0))
    win.run()
    wait_iterations(qtbot, win, 5)
    first = win.controller._active_run
    answers.append(False)
    win.run()  # "no": the running run goes on
    assert win.controller.running and win.controller._active_run == first and not answers
    answers.append(True)
    win.run()  # "yes": a new run replaces it
    assert win.controller._active_run == first + 1
    wait_iterations(qtbot, win, 5)  # the new run has started (curves restart at 0)
    win.stop()
    wait_idle(qtbot, win)


def test_noise_controls_disabled_for_measured_y(qtbot, fake_engine, make_window,
                                                tmp_path) -> None:
    fake_engine()
    win = make_window({"network": "fake-net"})
    assert win.noise_panel.std.isEnabled() and win.noise_panel.seed.isEnabled()
    y = tmp_path / "y.npy"
    np.save(y, np.zeros(8, dtype=np.float32))
    win.data_panel.set_file("data", str(y))
    assert not win.noise_panel.std.isEnabled() and not win.noise_panel.seed.isEnabled()
    assert not win.noise_panel.resample.isEnabled()
    win.data_panel.use_dataset.click()
    assert win.noise_panel.std.isEnabled()


def test_run_all_leaves_out_the_experimental_layerwise(qtbot, fake_engine, make_window,
                                                       monkeypatch) -> None:
    fake_engine()
    win = make_window({"network": "fake-net"})
    asked: list[list[str]] = []
    monkeypatch.setattr(win.controller, "run_all", lambda req, methods: asked.append(methods))
    win.run_all_methods()
    assert asked and "layerwise" not in asked[0] and "joint" in asked[0]
    assert "experimental" in METHOD_LABELS["layerwise"]


def test_shortcuts_work_while_a_number_field_has_focus(qtbot, fake_engine, make_window) -> None:
    from PySide6 import QtCore

    fake_engine(delay=0.002)
    win = make_window({"network": "fake-net", "max_iter": 100000, "tol": 0.0})
    win.activateWindow()
    field = win.solver_panel.max_iter
    field.setFocus()
    qtbot.waitUntil(field.hasFocus, timeout=2000)
    field.lineEdit().selectAll()
    qtbot.keyClicks(field, "200000")  # typed, not yet committed with Return
    key, ctrl = QtCore.Qt.Key, QtCore.Qt.KeyboardModifier.ControlModifier
    qtbot.keyClick(field, key.Key_R, ctrl)
    qtbot.waitUntil(lambda: win.controller.running, timeout=5000)
    assert win.controller.run_request["max_iter"] == 200000  # the typed value ran
    wait_iterations(qtbot, win, 5)
    qtbot.keyClick(field, key.Key_Space)  # Pause
    qtbot.waitUntil(lambda: win.controller.paused, timeout=5000)
    qtbot.keyClick(field, key.Key_Space)  # Resume
    qtbot.waitUntil(lambda: not win.controller.paused, timeout=5000)
    qtbot.keyClick(field, key.Key_Escape)  # Stop
    wait_idle(qtbot, win)
    assert win.run_table.runs == []
