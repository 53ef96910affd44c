"""Runs inside a subprocess for bench_gui: the real window, timed. Prints one JSON line.

``python -m benchmarks.suite._gui_probe startup``: prints the wall-clock time (time.time()) at which
the main window has been shown and its first events processed, then exits.
``python -m benchmarks.suite._gui_probe run ITERATIONS [ROUNDS]``: opens the window with the app's
default problem (CNN autoencoder, joint method), runs ITERATIONS iterations while a 10 ms timer
on the GUI thread measures how late the event loop serves it, then runs the same request
headless in the same process (same threads, window idle); ROUNDS times (default 1). Prints
the summed throughputs and the latencies. The solver
backend is the app's (``LBI_ENGINE_BACKEND`` or the setting; bench_gui sets it per row).

Diagnosis knobs (environment, for experiments; the benchmark sets none):
``LBI_PROBE_THREADS`` solver threads of the request (default 1), ``LBI_PROBE_SWITCH`` the
interpreter's GIL switch interval in seconds, ``LBI_PROBE_NODRAW=1`` disconnects the view
updates (the worker still runs and streams; nothing is drawn).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def _startup() -> None:
    from PySide6 import QtCore

    import lbi_gui.window.main_window as mw

    original = mw.MainWindow.showEvent

    def shown(self: Any, event: Any) -> None:
        original(self, event)

        def report() -> None:
            print(json.dumps({"shown": time.time()}), flush=True)
            os._exit(0)  # the engine may still be loading on its thread: no clean-up needed

        QtCore.QTimer.singleShot(0, report)

    mw.MainWindow.showEvent = shown
    from lbi_gui.app import main

    main(["--no-restore"])


def _run(iterations: int, n_rounds: int) -> None:
    from PySide6 import QtCore, QtWidgets

    from lbi_gui.params import default_request
    from lbi_gui.window.main_window import MainWindow

    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([])
    request = default_request(max_iter=iterations, tol=0.0,
                              threads=int(os.environ.get("LBI_PROBE_THREADS", "1")))
    if os.environ.get("LBI_PROBE_SWITCH"):  # experiment: the interpreter's GIL switch interval
        sys.setswitchinterval(float(os.environ["LBI_PROBE_SWITCH"]))
    window = MainWindow(request, autorun=True, restore_layout=False)
    if os.environ.get("LBI_PROBE_NODRAW"):  # experiment: no drawing of iterates and curves
        window.controller.view_update.disconnect()
    draw: list[float] = []  # seconds the GUI thread spends per view update (images, curves)
    timed = {"view": window.runner.on_view_update, "curves": window.curves.update_curves}

    def view_update(prog: Any) -> None:
        start = time.perf_counter()
        timed["view"](prog)
        draw.append(time.perf_counter() - start)

    curve_draw: list[float] = []

    def update_curves(*a: Any, **k: Any) -> Any:
        start = time.perf_counter()
        out = timed["curves"](*a, **k)
        curve_draw.append(time.perf_counter() - start)
        return out

    window.curves.update_curves = update_curves
    if not os.environ.get("LBI_PROBE_NODRAW"):
        window.controller.view_update.disconnect()
        window.controller.view_update.connect(view_update)
    window.show()
    ticks: list[float] = []
    rounds: list[dict[str, Any]] = []  # one per GUI run: start, end, iterations, elapsed
    headless: list[dict[str, float]] = []
    state: dict[str, Any] = {"torch_in_gui": None}
    timer = QtCore.QTimer()
    timer.setTimerType(QtCore.Qt.TimerType.PreciseTimer)
    timer.setInterval(10)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))

    def on_state(new_state: str) -> None:
        if new_state == "running" and (not rounds or "end" in rounds[-1]) \
                and len(rounds) < n_rounds:
            rounds.append({"start": time.perf_counter(), "cpu0": time.process_time()})
            ticks.append(float("nan"))  # no lateness across the pause between rounds
            timer.start()

    def on_finished(result: Any) -> None:
        rounds[-1].update(end=time.perf_counter(), cpu1=time.process_time(),
                          iterations=result.iterations,
                          elapsed=result.elapsed)
        timer.stop()
        if state["torch_in_gui"] is None:  # the process backend keeps torch out of the GUI
            state["torch_in_gui"] = "torch" in sys.modules
        # Headless right after each GUI run, in this process, with the window idle: pairs
        # taken close in time keep a shared machine's changing load out of the ratio.
        headless.append(_headless(request, iterations))
        if len(rounds) < n_rounds:
            QtCore.QTimer.singleShot(200, window.runner.run)
        else:
            QtCore.QTimer.singleShot(200, app.quit)

    window.controller.state_changed.connect(on_state)
    window.controller.run_finished.connect(on_finished)
    QtCore.QTimer.singleShot(600_000, app.quit)  # a safety net
    app.exec()
    lateness = [max(0.0, (b - a) - 0.010) for a, b in zip(ticks[:-1], ticks[1:], strict=False)
                if a == a and b == b]  # NaN marks a gap between rounds
    backend = window.controller.backend.name
    window.controller.shutdown()
    if "lbi_gui.engine.host" in sys.modules:
        sys.modules["lbi_gui.engine.host"].shutdown_host()
    print(json.dumps({
        "backend": backend, "torch_in_gui": state["torch_in_gui"], "rounds": len(rounds),
        "iterations": sum(r["iterations"] for r in rounds),
        "gui_wall": sum(r["end"] - r["start"] for r in rounds),
        "gui_solver": sum(r["elapsed"] for r in rounds),
        # CPU seconds of this (the GUI) process during the GUI runs; with the thread backend
        # they include the solver thread's.
        "gui_process_cpu": sum(r["cpu1"] - r["cpu0"] for r in rounds),
        "headless_wall": sum(h["wall"] for h in headless),
        "headless_solver": sum(h["solver"] for h in headless),
        "gui_walls": [r["end"] - r["start"] for r in rounds],
        "headless_walls": [h["wall"] for h in headless],
        "lateness": lateness, "view_updates": len(draw), "view_seconds": sum(draw),
        "curve_draws": len(curve_draw), "curve_seconds": sum(curve_draw),
    }), flush=True)


_HEADLESS: dict[str, Any] = {}


def _headless(request: dict[str, Any], iterations: int) -> dict[str, float]:
    from lbi_engine.api import InversionRequest, iterate, prepare

    if "prepared" not in _HEADLESS:
        prepared = _HEADLESS["prepared"] = prepare(InversionRequest(**request))
        for _ in iterate(prepared):  # warm-up (norms, first-call costs)
            break
    prepared = _HEADLESS["prepared"]
    start = time.perf_counter()
    last = None
    for record in iterate(prepared):
        last = record
    return {"wall": time.perf_counter() - start, "solver": float(last.elapsed)}


if __name__ == "__main__":
    if sys.argv[1] == "startup":
        _startup()
    else:
        _run(int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 1)
