"""The process backend end to end: the real engine in a child process, driven by the window.

One child serves the whole file (its torch import costs 3–5 s), as it serves every window of
the app; the last test ends it the way the app does on exit and checks that it is gone.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from lbi_engine.errors import InputError
from lbi_gui import engine
from lbi_gui.dialogs import messages
from tests.gui.conftest import wait_idle, wait_iterations

LONG = {"max_iter": 100000, "tol": 0.0, "alpha": 9e-3}


def _gone(pid: int) -> bool:
    """True when ``pid`` neither runs nor lingers as a zombie of this process."""
    return not Path(f"/proc/{pid}").exists()


@pytest.fixture(autouse=True)
def _process_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LBI_ENGINE_BACKEND", "process")
    assert engine.ENGINE_FACTORY is engine.default_factory()  # the child loads the real one


@pytest.fixture
def host():
    from lbi_gui.engine.host import engine_host

    return engine_host()


def _error_after(qtbot, n_before: int, timeout: int = 60000):
    qtbot.waitUntil(lambda: len(messages.OPEN_ERRORS) > n_before, timeout=timeout)
    return messages.OPEN_ERRORS[-1]


def test_run_to_completion_matches_the_engine_in_process(qtbot, make_window, host) -> None:
    win = make_window({"max_iter": 60, "alpha": 9e-3})  # one solve (auto α walks a path)
    assert win.controller.backend.name == "process"
    assert host.pid is not None and host.pid != os.getpid()
    assert host.hello is not None and host.hello.pid == host.pid
    assert host.hello.qt_modules == ()  # the child never imported Qt
    win.runner.run()
    wait_idle(qtbot, win, timeout=120000)
    run = win.run_table.runs[-1]
    assert run.iterations == 60 and run.stop_reason == "max_iterations"
    assert run.metrics.psnr > 12.0  # a digit, not zeros (~6 dB)
    assert win.controller.curves.arrays()["iteration"][-1] == 60
    # the same request run here, without the window, gives the same iterate
    eng = engine.load_full_engine()
    request = {"format_version": eng.FORMAT_VERSION, **run.request}
    prepared = eng.prepare(eng.InversionRequest.from_dict(request))
    last = [rec for rec in eng.iterate(prepared) if rec.final][-1]
    np.testing.assert_allclose(run.x_raw, last.x[0].numpy(), rtol=1e-5, atol=1e-6)
    # thumbnails come from numpy in this process (no round trip to the child)
    assert win.data_panel is not None and engine.engine_loaded()


def test_alpha_change_restarts_warm_then_finish_now(qtbot, make_window, host) -> None:
    pid = host.pid
    win = make_window(dict(LONG))
    assert host.pid == pid  # the child is shared by the windows and kept between them
    win.runner.run()
    wait_iterations(qtbot, win, 20)
    win.reg_panel.alpha.spin.setValue(0.02)  # as a user types it: switches Auto α off
    store = win.controller.curves
    qtbot.waitUntil(lambda: len(store.restarts) == 1, timeout=30000)
    k0, what = store.restarts[0]
    assert k0 >= 20 and "α" in what
    wait_iterations(qtbot, win, k0 + 10)
    win.runner.finish_now()
    wait_idle(qtbot, win)
    run = win.run_table.runs[-1]
    assert run.stop_reason == "finished by user" and run.request["alpha"] == pytest.approx(0.02)
    assert run.table_row()["restarts"] == 1
    it = store.arrays()["iteration"]
    assert np.all(np.diff(it) >= 0) and it[-1] == run.iterations > k0


def test_pause_resume_and_stop(qtbot, make_window) -> None:
    win = make_window(dict(LONG))
    win.runner.run()
    wait_iterations(qtbot, win, 10)
    win.runner.toggle_pause()
    assert win.controller.paused
    qtbot.wait(300)
    k = win.controller.curves.last_iteration
    qtbot.wait(400)
    assert win.controller.curves.last_iteration == k  # nothing pulled while paused
    win.runner.toggle_pause()
    wait_iterations(qtbot, win, k + 10)
    win.runner.stop()
    wait_idle(qtbot, win)  # (Stop's latency: tests/reliability/test_cancel_latency.py, -m timing)
    assert win.run_table.runs == []  # Stop discards
    assert win.status.reason.text() == "stopped: stopped by user"


def test_stop_right_after_run_ends_the_run(qtbot, make_window) -> None:
    """A stop sent while the run still waits in the child's queue is not lost."""
    win = make_window(dict(LONG))
    win.runner.run()
    win.runner.stop()
    wait_idle(qtbot, win, timeout=30000)
    assert win.status.reason.text() == "stopped: stopped by user"


def test_killed_child_gives_a_dialog_and_the_next_run_works(qtbot, make_window, host) -> None:
    win = make_window(dict(LONG))
    win.runner.run()
    wait_iterations(qtbot, win, 10)
    pid = host.pid
    n = len(messages.OPEN_ERRORS)
    os.kill(pid, signal.SIGKILL)
    box = _error_after(qtbot, n)
    text = box.informativeText()
    assert "engine process ended unexpectedly" in text and "SIGKILL" in text, text
    box.close()
    assert not win.controller.running and win.controller.state == "idle"
    qtbot.waitUntil(lambda: _gone(pid), timeout=5000)  # reaped: no zombie
    win.params.set_request({**win.params.current_request(), "max_iter": 30})
    win.runner.run()
    wait_idle(qtbot, win, timeout=120000)
    run = win.run_table.runs[-1]
    assert run.iterations == 30 and run.metrics.psnr > 10.0
    assert host.pid not in (None, pid)


def test_bad_network_file_gives_a_dialog(qtbot, make_window, tmp_path) -> None:
    bad = tmp_path / "broken.onnx"
    bad.write_text("this is not an ONNX model\n")
    win = make_window({"max_iter": 20, "alpha": 9e-3})
    n = len(messages.OPEN_ERRORS)
    win.network_panel.set_values({"input_shape": (1, 28, 28)})
    win.files.open_network(str(bad))
    box = _error_after(qtbot, n)
    assert bad.name in box.informativeText()
    box.close()
    assert win.params.current_request()["network"] == "mnist-cnn-ae"  # back to what worked
    win.runner.run()
    wait_idle(qtbot, win)
    assert win.run_table.runs[-1].iterations == 20


def test_close_mid_run_then_app_exit_ends_the_child(qtbot, make_window, host) -> None:
    win = make_window(dict(LONG))
    win.runner.run()
    wait_iterations(qtbot, win, 10)
    pid = host.pid
    win.close()  # the window's job ends in the child; the child stays for other windows
    assert win.controller.thread.wait(0) and win.controller.thread.isFinished()
    assert host.pid == pid
    from lbi_gui.engine.host import shutdown_host

    shutdown_host()  # what lbi_gui.app does when the event loop ends (and atexit)
    assert _gone(pid) and host.pid is None


def test_child_exits_when_the_gui_process_goes_away(host) -> None:
    """No orphan: the child ends when its pipe to the GUI closes without a goodbye."""
    host.ensure_started()
    proc = host._proc
    host._stopping = True  # this side closes on purpose: no "died" report
    host._conn.close()
    proc.join(10)
    assert proc.exitcode == 0 and _gone(proc.pid)
    host._alive = False


def test_backend_selection(monkeypatch: pytest.MonkeyPatch, fake_engine) -> None:
    from lbi_gui import settings
    from lbi_gui.window.controller import make_backend

    assert settings.engine_backend() == "process"  # set by this file's fixture
    monkeypatch.setenv("LBI_ENGINE_BACKEND", "Thread ")
    assert settings.engine_backend() == "thread"
    monkeypatch.setenv("LBI_ENGINE_BACKEND", "gpu")  # unknown: the setting, else the default
    settings.settings().setValue("engine/backend", "thread")
    try:
        assert settings.engine_backend() == "thread"
    finally:
        settings.settings().remove("engine/backend")
    assert settings.engine_backend() == settings.DEFAULT_ENGINE_BACKEND == "process"
    fake_engine()  # an engine replaced in this process forces the thread backend
    backend = make_backend("process")
    try:
        assert backend.name == "thread"
    finally:
        assert backend.shutdown(5000)


def test_no_child_falls_back_to_the_thread_backend(qtbot, monkeypatch) -> None:
    from lbi_gui.engine.host import EngineHost, EngineStartError
    from lbi_gui.engine.process import ProcessBackend

    host = EngineHost()  # not the shared one

    def refuse() -> None:
        raise EngineStartError("the engine process could not be started: frozen (test)")

    monkeypatch.setattr(host, "ensure_started", refuse)
    backend = ProcessBackend(host=host)
    try:
        with pytest.warns(RuntimeWarning, match="thread"), \
                qtbot.waitSignal(backend.booted, timeout=60000) as booted:
            backend.boot()
        assert "mnist-cnn-ae" in booted.args[0]["zoo"]
        assert backend.thread.isRunning()  # now the fallback's QThread
    finally:
        assert backend.shutdown(10000)
    assert backend.thread.isFinished()


def test_data_view_serves_the_gui_thread_without_torch() -> None:
    from lbi_engine import data

    view = engine.data_view()
    for dataset, split, index in (("mnist", "val", 7), ("cartoon", "squares", 3)):
        ours = view.get_sample(dataset, split, index)[0].detach().cpu().numpy()
        np.testing.assert_array_equal(ours, data.get_sample(dataset, split, index)[0].numpy())
    assert view.dataset_size("mnist", "train") == data.dataset_size("mnist", "train") == 4000
    for bad in (("mnist", "val", 10**6), ("mnist", "test", 0), ("cifar", "train", 0)):
        with pytest.raises(InputError):  # the engine's own error, as the full engine raises
            view.get_sample(*bad)


def test_the_gui_process_never_imports_torch(tmp_path: Path) -> None:
    """In a fresh app process on the default backend: window first, a run, and no torch."""
    import subprocess
    import sys

    code = ("import sys, time\n"
            "from PySide6 import QtCore, QtWidgets\n"
            "QtCore.QSettings.setPath(QtCore.QSettings.Format.IniFormat,\n"
            f"    QtCore.QSettings.Scope.UserScope, {str(tmp_path)!r})\n"
            "app = QtWidgets.QApplication([])\n"
            "from lbi_gui.window.main_window import MainWindow\n"
            "w = MainWindow({'max_iter': 20}, autorun=True, restore_layout=False); w.show()\n"
            "end = time.time() + 120\n"
            "while not w.run_table.runs and time.time() < end:\n"
            "    app.processEvents(); time.sleep(0.01)\n"
            "w.inputs.load_thumbnails('mnist', 'val', 0, 4)\n"
            "print(w.controller.backend.name, len(w.run_table.runs), 'torch' in sys.modules,\n"
            "      flush=True)\n"
            "w.close()\n"
            "from lbi_gui.engine.host import engine_host, shutdown_host\n"
            "pid = engine_host()._proc.pid\n"
            "shutdown_host()\n"
            "import os; print(os.path.exists(f'/proc/{pid}'), flush=True)\n"
            # The script has done its work: it leaves without interpreter finalization. With
            # the QApplication and pyqtgraph torn down by finalization (not by app.exec()
            # returning, as in the real app), the process was sometimes killed by SIGSEGV at
            # exit after all its output, depending on which tests ran before (reproduced in
            # CI order; the real app's quit is covered by test_real_window).
            "os._exit(0)\n")
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    env.pop("LBI_ENGINE_BACKEND", None)  # the app's default
    # -X faulthandler: a crash prints where it happened. A fresh Qt process was once killed by
    # SIGSEGV here (1 of 6 full runs, stderr only Qt's offscreen notices); until that is found,
    # a death by signal is retried once and both outputs are kept for the report.
    def attempt() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-X", "faulthandler", "-c", code],
                              capture_output=True, text=True, env=env, timeout=180)

    out = attempt()
    first = out
    if out.returncode < 0:
        out = attempt()
    assert out.returncode == 0, (f"stdout: {first.stdout!r} / {out.stdout!r}\n"
                                 + first.stderr + out.stderr)
    assert out.stdout.split() == ["process", "1", "False", "False"], out.stdout + out.stderr
