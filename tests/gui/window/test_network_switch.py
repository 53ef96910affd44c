"""Switching the network in the window by clicks: the data follows it (never an error
dialog), a method the new network disables is reset, and the runs table names each run's
network and shows a run with its own ground truth."""

from __future__ import annotations

import numpy as np

from lbi_gui.dialogs import messages
from tests.gui.conftest import wait_idle, wait_ready


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
    win.params.flush_changes()
    qtbot.waitUntil(lambda: win.view.info.network_name == "circle-perceptron", timeout=60000)
    wait_ready(qtbot, win)
    assert tuple(win.view.info.input_shape) == (1, 64, 64) and win.view.info.truth.shape == (64, 64)
    win.runner.run()
    wait_idle(qtbot, win)
    assert win.run_table.runs[-1].request["network"] == "circle-perceptron"
    # ... and the other way round: MNIST digits bring an MNIST network along
    _choose(win.data_panel.dataset, "mnist")
    assert win.params.current_request()["network"] in ("mnist-cnn-ae", "mnist-perceptron-ae")
    win.params.flush_changes()
    qtbot.waitUntil(lambda: win.view.info.network_name != "circle-perceptron", timeout=60000)
    wait_ready(qtbot, win)
    assert win.view.info.truth.shape == (28, 28)
    assert len(messages.OPEN_ERRORS) == errors  # never an error dialog


def test_switching_network_resets_a_method_it_disables(qtbot, make_window) -> None:
    win = make_window({"network": "circle-perceptron", "dataset": "cartoon", "split": "disc",
                       "method": "pdhg", "max_iter": 5})
    assert len(win.view.info.layers) == 1 and win.params.current_request()["method"] == "pdhg"
    _choose(win.network_panel.combo, "mnist-cnn-ae")
    win.params.flush_changes()
    qtbot.waitUntil(lambda: win.view.info.network_name == "mnist-cnn-ae", timeout=60000)
    wait_ready(qtbot, win)
    assert win.params.current_request()["method"] == "joint"
    win.runner.run()
    wait_idle(qtbot, win)
    assert win.run_table.runs[-1].request["method"] == "joint"


def test_runs_table_has_a_network_column_and_shows_a_run_with_its_own_truth(
        qtbot, make_window) -> None:
    from lbi_gui.widgets.run_table import COLUMNS

    win = make_window({"max_iter": 5})
    win.runner.run()
    wait_idle(qtbot, win)
    mnist_run = win.run_table.runs[-1]
    _choose(win.network_panel.combo, "circle-perceptron")
    win.params.flush_changes()
    qtbot.waitUntil(lambda: win.view.info.network_name == "circle-perceptron", timeout=60000)
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
