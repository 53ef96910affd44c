"""Joint ↔ layer-wise in one click, both runs in the table, side-by-side comparison."""

from __future__ import annotations

import numpy as np

from tests.gui.conftest import wait_idle


def test_switch_joint_layerwise_and_compare(qtbot, make_window) -> None:
    win = make_window({"max_iter": 150, "noise_std": 0.05})
    win.runner.run()
    wait_idle(qtbot, win, timeout=120000)
    win.actions_.switch.trigger()  # Ctrl+L
    win.params.flush_changes()
    assert win.params.current_request()["method"] == "layerwise"
    win.runner.run()
    wait_idle(qtbot, win, timeout=120000)
    runs = win.run_table.runs
    assert [r.request["method"] for r in runs] == ["auto", "layerwise"]  # auto: the default
    assert runs[0].metrics.method_run == "joint"  # what auto ran on the 2-layer CNN
    assert win.run_table.table.rowCount() == 2
    for r in runs:
        assert np.isfinite(r.metrics.psnr)
        cells = {win.run_table.table.horizontalHeaderItem(c).text():
                 win.run_table.table.item(runs.index(r), c).text()
                 for c in range(win.run_table.table.columnCount())}
        assert cells["method"] == r.table_row()["method"]
        assert cells["method"].startswith(r.request["method"])  # "auto: joint" for auto
        assert cells["PSNR"] == f"{r.metrics.psnr:.4g}"
    win.run_table.select_ids([runs[0].run_id, runs[1].run_id])
    view = win.run_table.compare_view
    assert view.shown == (runs[0].run_id, runs[1].run_id)
    np.testing.assert_array_equal(view.items[0].image, runs[0].x_display)
    np.testing.assert_array_equal(view.items[1].image, runs[1].x_display)
    np.testing.assert_allclose(view.items[2].image, runs[1].x_display - runs[0].x_display)
    assert "PSNR" in view.text.text()


def test_run_all_methods_fills_the_table(qtbot, make_window) -> None:
    win = make_window({"max_iter": 60})
    win.runner.run_all_methods()
    qtbot.waitUntil(lambda: not win.controller.running and len(win.run_table.runs) >= 4,
                    timeout=180000)
    methods = {r.request["method"] for r in win.run_table.runs}
    # PDHG: one layer only; layer-wise runs with the CNN's shipped feature prior
    assert methods == {"joint", "layerwise", "landweber", "backprop"}
