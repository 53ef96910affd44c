"""Closing the window mid-run, 50 times in a row: no crash, no dialog, no thread left behind.

The close comes at different moments: while the problem is still being prepared, right after
Run (before the first record), and mid-run. Every fifth window inverts the bundled CNN
autoencoder (the largest zoo network), the others the small test network, so that the 50
rounds fit in the default suite's time.
"""

from __future__ import annotations

import gc

from tests.reliability.conftest import os_threads, wait_ready

ROUNDS = 50
REQUEST = {"network": "mnist-cnn-ae", "dataset": "mnist", "split": "val", "index": 0,
           "method": "joint", "max_iter": 10**6, "tol": 0.0, "threads": 1}


def _close(qtbot, win) -> None:
    win.close()
    assert win.controller.thread.wait(5000), "the solver thread did not stop"
    assert win.controller.thread.isFinished() and not win.controller.running


def test_close_mid_run_fifty_times(qtbot, window, dialogs, kit) -> None:
    small = kit.base_request(max_iter=10**6, tol=0.0)
    # a warm-up window: torch creates its worker pools once per process
    first = window(REQUEST)
    first.runner.run()
    qtbot.waitUntil(lambda: first.controller.curves.last_iteration >= 5, timeout=60000)
    _close(qtbot, first)
    qtbot.wait(50)
    baseline = os_threads()
    for i in range(ROUNDS):
        moment = i % 3
        win = window(REQUEST if i % 5 == 0 else small, wait=moment != 0)
        if moment == 0:  # still booting / preparing
            qtbot.wait(5 * (i % 7))
        else:
            wait_ready(qtbot, win)
            win.runner.run()
            if moment == 2:  # mid-run
                qtbot.waitUntil(lambda w=win: w.controller.curves.last_iteration >= 10,
                                timeout=60000)
                assert win.controller.running
        _close(qtbot, win)
    qtbot.wait(100)
    gc.collect()
    assert os_threads() <= baseline + 1, (os_threads(), baseline)
    assert not dialogs, dialogs
