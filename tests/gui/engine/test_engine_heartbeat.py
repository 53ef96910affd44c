"""An engine child that stops responding (SIGSTOP): Stop ends it and the window recovers.

No timed assertions: waits have generous limits only so that a regression fails instead of
hanging the suite.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from lbi_gui import engine
from lbi_gui.dialogs import messages
from tests.gui.conftest import wait_idle, wait_iterations

LONG = {"max_iter": 100000, "tol": 0.0}


@pytest.fixture(autouse=True)
def _process_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LBI_ENGINE_BACKEND", "process")
    assert engine.ENGINE_FACTORY is engine.default_factory()


@pytest.fixture
def host():
    from lbi_gui.engine.host import engine_host

    return engine_host()


def test_heartbeat_answers_while_a_run_computes(qtbot, make_window, host) -> None:
    """The child's listener answers pings during a solve: busy is not unresponsive."""
    win = make_window(dict(LONG))
    win.runner.run()
    wait_iterations(qtbot, win, 5)
    first = host._ping_no
    qtbot.waitUntil(lambda: host._ping_no >= first + 3, timeout=20000)
    assert host.responsive()
    win.runner.stop()
    wait_idle(qtbot, win, timeout=60000)
    assert win.status.reason.text() == "stopped: stopped by user"


@pytest.mark.timeout(180)
def test_stopped_child_is_ended_by_stop_and_the_next_run_works(qtbot, make_window,
                                                                host) -> None:
    win = make_window(dict(LONG))
    win.runner.run()
    wait_iterations(qtbot, win, 5)
    pid = host.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        qtbot.waitUntil(lambda: not host.responsive(), timeout=30000)
        n = len(messages.OPEN_ERRORS)
        win.runner.stop()  # cancel cannot reach a stopped process: terminate, then kill
        qtbot.waitUntil(lambda: len(messages.OPEN_ERRORS) > n, timeout=30000)
    finally:
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGCONT)
    box = messages.OPEN_ERRORS[-1]
    text = box.informativeText()
    assert "stopped responding" in text and "Stop" in text, text
    box.close()
    qtbot.waitUntil(lambda: not win.controller.running and win.controller.state == "idle",
                    timeout=10000)
    qtbot.waitUntil(lambda: not Path(f"/proc/{pid}").exists(), timeout=10000)  # reaped
    # one solve
    win.params.set_request({**win.params.current_request(), "max_iter": 20, "alpha": 0.01})
    win.runner.run()
    wait_idle(qtbot, win, timeout=120000)
    assert win.run_table.runs[-1].iterations == 20
    assert host.pid not in (None, pid)
