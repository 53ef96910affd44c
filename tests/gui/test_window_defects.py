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
    monkeypatch.setattr("lbi_gui.window.run.confirm", lambda *a, **k: answers.pop(0))
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


def test_run_all_leaves_out_layerwise_without_a_feature_prior(qtbot, fake_engine, make_window,
                                                              monkeypatch) -> None:
    fake_engine()
    win = make_window({"network": "fake-net"})
    asked: list[list[str]] = []
    monkeypatch.setattr(win.controller, "run_all", lambda req, methods: asked.append(methods))
    win.run_all_methods()
    assert asked and "joint" in asked[0]
    if win.info is not None and len(win.info.layers) > 1:  # fake-net has no prior file
        assert "layerwise" not in asked[0]
    assert "prior" in METHOD_LABELS["layerwise"]


def test_feature_prior_availability_is_read_from_files(tmp_path) -> None:
    from lbi_gui.params import feature_prior_available

    assert feature_prior_available("mnist-cnn-ae", None)  # shipped beside the weights
    assert not feature_prior_available("mnist-perceptron-ae", None)
    base = tmp_path / "mine.prior"
    assert not feature_prior_available("x", str(base))
    (tmp_path / "mine.prior.json").write_text("{}")
    assert not feature_prior_available("x", str(base) + ".json")  # tensors missing
    (tmp_path / "mine.prior.safetensors").write_bytes(b"")
    assert feature_prior_available("x", str(base))


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


def test_parameter_change_marks_the_shown_result_stale(qtbot, fake_engine, make_window) -> None:
    fake_engine()
    win = make_window({"network": "fake-net", "max_iter": 30})
    win.run()
    wait_idle(qtbot, win)
    win.refresh_stale()
    assert not win.image_grid.stale and not win.curves.stale  # its own parameters: current
    win.reg_panel.alpha.setValue(0.05)
    win.reg_panel._user_alpha()  # what moving the slider does: Auto α off, the user's α
    win.flush_changes()
    assert win.image_grid.stale and win.curves.stale and win.curves.stale_banner.isVisibleTo(win)
    assert "α" in win.curves.stale_banner.text() and "#1" in win.curves.stale_banner.text()
    assert win.status_reason.text().startswith("stale")
    assert win.image_grid.items["iterate"].opacity() < 1
    win.run()  # a new run with these parameters is current again
    wait_idle(qtbot, win)
    assert not win.image_grid.stale and not win.curves.stale
    assert win.image_grid.items["iterate"].opacity() == 1


def test_runs_table_has_a_network_column_and_shows_a_run_with_its_own_truth(
        qtbot, make_window) -> None:
    from lbi_gui.widgets.run_table import COLUMNS

    win = make_window({"max_iter": 5})
    win.run()
    wait_idle(qtbot, win)
    mnist_run = win.run_table.runs[-1]
    _choose(win.network_panel.combo, "circle-perceptron")
    win.flush_changes()
    qtbot.waitUntil(lambda: win.info.network_name == "circle-perceptron", timeout=60000)
    wait_ready(qtbot, win)
    col = COLUMNS.index("network")
    networks = {win.run_table.table.item(r, col).text()
                for r in range(win.run_table.table.rowCount())}
    assert networks == {"mnist-cnn-ae"}
    row = next(r for r in range(win.run_table.table.rowCount())
               if win.run_table.table.item(r, 0).text() == str(mnist_run.run_id))
    win.run_table.table.itemDoubleClicked.emit(win.run_table.table.item(row, col))
    assert win.image_grid.truth.shape == (28, 28)  # the run's own digit, not the circle
    np.testing.assert_array_equal(win.image_grid.truth, mnist_run.truth)
    assert win.image_grid.iterate.shape == (28, 28)


def test_restart_labels_do_not_overprint(qtbot) -> None:
    from lbi_gui.model.runs import CurveStore
    from lbi_gui.widgets.curves import CurvesPanel

    panel = CurvesPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 400)
    panel.show()
    store = CurveStore()
    store.extend([{"iteration": k, "objective": 0.99 ** k, "reg_term": 0.1,
                   "discrepancy": 0.1, "primal_residual": 0.1, "dual_residual": 0.1,
                   "psnr": 20.0, "ssim": 0.5, "elapsed": k * 1e-3, "bregman": [0.1]}
                  for k in range(300)])
    panel.update_curves(store)
    for k in (100, 104, 108):  # three restarts close together (a slider drag)
        panel.mark_restart(k, "α 0.009→0.02")
    qtbot.wait(50)
    labels = [line.label for plot, line in panel.restart_lines
              if plot is panel.plots["objective"]]
    boxes = [lab.mapRectToScene(lab.boundingRect()) for lab in labels]
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            assert not boxes[i].intersects(boxes[j]), (boxes[i], boxes[j])
