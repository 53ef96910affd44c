"""Thread mechanics against the numpy fake engine: throttling, pause, restart, queue, errors.

The fake's numbers are known in closed form (x_k = (1 - 0.99^k) x†, objective 0.99^k), so
these tests check exactly what reached the window.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from PySide6 import QtCore

from tests.gui.conftest import wait_idle, wait_iterations
from tests.gui.fake_engine import RATE


class Counter(QtCore.QObject):
    """A GUI-thread receiver (pytest-qt pitfall: never count in a worker-thread lambda)."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    @QtCore.Slot(object)
    def hit(self, _obj: object) -> None:
        self.n += 1


def test_fast_solver_keeps_every_point_but_redraws_at_most_30_hz(qtbot, fake_engine,
                                                                 make_window) -> None:
    fake_engine(delay=0.0)
    win = make_window({"max_iter": 30000, "report_every": 1})
    counter = Counter()
    win.controller.view_update.connect(counter.hit)
    t0 = time.perf_counter()
    win.runner.run()
    wait_idle(qtbot, win)
    seconds = time.perf_counter() - t0
    arr = win.controller.curves.arrays()
    # every reported record: iteration 0, 1, ..., 29999 and the final 30000
    np.testing.assert_array_equal(arr["iteration"], np.arange(30001))
    np.testing.assert_allclose(arr["objective"], RATE ** np.arange(30001), rtol=1e-12)
    assert counter.n <= 30 * seconds + 3, (counter.n, seconds)
    assert len(win.run_table.runs) == 1


def test_pause_stops_pulling_and_resume_continues(qtbot, fake_engine, make_window) -> None:
    fake_engine(delay=0.0005)
    win = make_window({"max_iter": 100000, "report_every": 10})
    win.runner.run()
    wait_iterations(qtbot, win, 50)
    win.runner.toggle_pause()
    assert win.controller.paused and win.actions_.pause.text() == "Resume"
    qtbot.wait(150)
    k = win.controller.curves.last_iteration
    qtbot.wait(300)
    assert win.controller.curves.last_iteration == k  # nothing pulled while paused
    win.runner.toggle_pause()
    wait_iterations(qtbot, win, k + 100)
    win.runner.stop()
    wait_idle(qtbot, win)
    assert win.run_table.runs == []  # Stop discards
    assert win.status.reason.text() == "stopped: stopped by user"


def test_hot_alpha_change_restarts_warm_and_marks_it(qtbot, fake_engine, make_window) -> None:
    fake_engine(delay=0.0005)
    # a budget of ~2 s: the run must still be going when the 150 ms edit debounce has passed,
    # also on a loaded machine (at 600 iterations it sometimes ended first)
    win = make_window({"max_iter": 4000, "report_every": 10, "alpha": 9e-3})
    win.runner.run()
    wait_iterations(qtbot, win, 100)
    win.reg_panel.alpha.spin.setValue(0.02)  # as a user types it: switches Auto α off
    wait_idle(qtbot, win)
    store = win.controller.curves
    assert len(store.restarts) == 1
    k0, what = store.restarts[0]
    assert k0 >= 100 and "α" in what
    it = store.arrays()["iteration"]
    assert np.all(np.diff(it) >= 0)  # the count continues through the restart
    # max_iter is the run's budget: the restart continues it
    assert it[-1] == 4000 and win.run_table.runs[-1].request["max_iter"] == 4000
    reg = store.arrays()["reg_term"]
    assert reg[0] == pytest.approx(9e-3) and reg[-1] == pytest.approx(0.02)
    assert len(win.curves.restart_lines) == len(win.curves.plots)  # one line per plot
    run = win.run_table.runs[-1]
    assert run.request["alpha"] == pytest.approx(0.02) and run.table_row()["restarts"] == 1
    # listed with the settings of both segments, not only the final ones
    assert [k for k, _req in run.segments] == [0, k0]
    assert run.segments[0][1]["alpha"] == pytest.approx(9e-3)
    assert run.table_row()["segments"] == f"k 0: α 0.009; k {k0}: α 0.02"


def test_finish_now_keeps_the_current_iterate(qtbot, fake_engine, make_window) -> None:
    fake_engine(delay=0.001)
    win = make_window({"max_iter": 100000})
    win.runner.run()
    wait_iterations(qtbot, win, 30)
    win.runner.finish_now()
    wait_idle(qtbot, win)
    run = win.run_table.runs[-1]
    assert run.stop_reason == "finished by user"
    k = run.iterations
    np.testing.assert_allclose(run.x_display, (1 - RATE ** k) * win.view.info.truth, rtol=1e-6)


def test_run_all_collects_errors_in_one_dialog(qtbot, fake_engine, make_window,
                                                monkeypatch) -> None:
    fake_engine()
    win = make_window({"max_iter": 50})
    from tests.gui import fake_engine as fe

    original = fe.FakeRequest.from_dict

    def picky(d):  # "landweber" fails in this fake
        if d.get("method") == "landweber":
            raise fe.InputError("landweber: not for this network (fake)")
        return original(d)

    monkeypatch.setattr(fe.FakeRequest, "from_dict", staticmethod(picky))
    shown = []
    monkeypatch.setattr("lbi_gui.window.run.show_error",
                        lambda parent, title, msg, **kw: shown.append((title, msg)))
    win.runner.run_all_methods()
    qtbot.waitUntil(lambda: not win.controller.running and bool(shown) or
                    len(win.run_table.runs) == 4, timeout=20000)
    qtbot.waitUntil(lambda: bool(shown), timeout=20000)
    methods = [r.request["method"] for r in win.run_table.runs]
    # pdhg skipped: 2-layer network; layer-wise only where the network has a feature prior
    from lbi_gui.params import feature_prior_available

    request = win.params.current_request()
    with_prior = feature_prior_available(request["network"], request.get("feature_prior"))
    assert methods == (["joint", "layerwise", "backprop"] if with_prior else ["joint", "backprop"])
    assert "landweber" in shown[0][1]


def test_a_stop_before_a_sent_run_begins_makes_it_begin_stopped() -> None:
    """The thread backend's worker, with a recording driver: a Stop that lands between the
    GUI's send and the solver thread's start reaches the run as its starting action (the
    process child's rule); a run sent after the Stop is not touched by it."""
    from types import SimpleNamespace

    from lbi_gui.engine.messages import RunJob
    from lbi_gui.engine.worker import EngineWorker

    worker = EngineWorker()
    calls: list[tuple[int, str | None]] = []
    worker.driver = SimpleNamespace(request_stop=lambda action: None,
                                    run=lambda job, action=None: calls.append((job.run_id,
                                                                               action)))
    worker.queued(1)
    worker.request_stop("stop")  # run 1 was sent but has not begun
    worker.queued(2)  # sent after the stop
    worker.run(RunJob(1, {}))
    worker.run(RunJob(2, {}))
    worker.queued(3)
    worker.request_stop("finish")
    worker.run(RunJob(3, {}))
    assert calls == [(1, "stop"), (2, None), (3, "finish")]
