"""Start-up: the sample and its ground truth show before the engine (torch) has
loaded, Run is enabled at once, and a run asked for meanwhile is queued and begins by itself."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np

from lbi_gui.window.main_window import MainWindow
from tests.gui.conftest import _forget_bundles, wait_idle
from tests.gui.fake_engine import make_fake_engine


def test_data_view_needs_no_torch() -> None:
    code = ("import sys; from lbi_gui import engine; v = engine.data_view(); "
            "v.get_sample('mnist', 'val', 3); v.get_sample('cartoon', 'disc', 1); "
            "v.list_zoo(); v.dataset_size('mnist', 'val'); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "False"


def test_sample_shows_and_run_is_queued_while_the_engine_starts(qtbot, monkeypatch) -> None:
    from lbi_gui import engine

    fake = make_fake_engine()
    gate = threading.Event()

    def slow_engine():  # an engine that takes as long as the test wants to load
        gate.wait(30)
        return fake

    monkeypatch.setattr(engine, "ENGINE_FACTORY", slow_engine)
    win = MainWindow({"max_iter": 30}, restore_layout=False)
    qtbot.addWidget(win)
    try:
        win.show()
        qtbot.wait(100)
        assert win.controller.engine_info is None  # still starting
        expected = engine.data_view().get_sample("mnist", "val", 0)[0].numpy()
        assert win.image_grid.truth is not None
        np.testing.assert_array_equal(np.squeeze(win.image_grid.truth), np.squeeze(expected))
        assert win.data_panel.thumbs.count() > 0  # thumbnails too
        win.data_panel.index.setValue(4)  # another sample: its truth shows at once
        qtbot.waitUntil(lambda: not np.array_equal(np.squeeze(win.image_grid.truth),
                                                   np.squeeze(expected)), timeout=3000)
        np.testing.assert_array_equal(
            np.squeeze(win.image_grid.truth),
            np.squeeze(engine.data_view().get_sample("mnist", "val", 4)[0].numpy()))
        assert win.actions_.run.isEnabled()
        win.actions_.run.trigger()
        assert "starting engine" in win.status.state.text().lower()
        assert not win.controller.running
        gate.set()
        qtbot.waitUntil(lambda: len(win.run_table.runs) == 1, timeout=30000)
        wait_idle(qtbot, win)
        assert win.run_table.runs[0].request["index"] == 4  # the parameters on screen
    finally:
        gate.set()
        win.close()
        assert win.controller.thread.wait(10000)
        _forget_bundles()
