"""The thread backend: a :class:`~lbi_gui.engine.run_driver.RunDriver` in a QThread (GUI process).

Why keep it beside the process backend (:mod:`lbi_gui.engine.process`): it starts at once,
needs no second interpreter, and it is the only backend that sees an engine replaced in this
process (the tests' numpy fake, :data:`lbi_gui.engine.ENGINE_FACTORY`). Its cost: the solver
thread shares the GIL with the window's painting, so a streaming window slows the solver (see
benchmarks/bench_gui.py).

:class:`EngineWorker` is the QObject living in the thread: its slots run the driver's jobs and
the driver's events (:mod:`lbi_gui.engine.messages`) become its signals. :class:`ThreadBackend`
owns worker and thread and implements :class:`~lbi_gui.engine.backend.EngineBackend`, the
interface :class:`~lbi_gui.window.controller.RunController` uses for both backends.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

from PySide6 import QtCore

from lbi_gui.engine.backend import signal_dispatcher
from lbi_gui.engine.run_driver import (  # noqa: F401 - re-exported: the window's data types live here
    EMIT_INTERVAL,
    ErrorInfo,
    PreparedInfo,
    Progress,
    RunDriver,
    RunJob,
    RunOutcome,
)

#: The interpreter's GIL switch interval in a GUI process running this backend (Python's
#: default: 5 ms). The solver thread releases the GIL inside every torch call and must win it
#: back from the GUI thread; with 5 ms each hand-over could wait that long while the window
#: paints (measured: solver throughput with the window streaming 0.23 → 0.52 of headless).
GIL_SWITCH_S = 0.001


class EngineWorker(QtCore.QObject):
    """Loads networks, prepares problems and runs solvers, all in its own thread."""

    booted = QtCore.Signal(object)  # {"zoo": [...], "datasets": [...], "cuda": bool}
    prepared = QtCore.Signal(int, object)  # job id, PreparedInfo
    progress = QtCore.Signal(object)  # Progress
    run_done = QtCore.Signal(object)  # RunOutcome
    failed = QtCore.Signal(int, object)  # job id, ErrorInfo

    def __init__(self) -> None:
        super().__init__()
        # the driver's events become this object's signals (emitted in the solver thread)
        self.driver = RunDriver(signal_dispatcher(self, "the thread backend"))
        # runs sent but not begun, and the stop asked for one of them: it begins stopped (the
        # process child's rule). Without it a Stop that landed between the GUI's send and the
        # solver thread's start was overwritten by the run's start and the run went on to
        # its end ("Cancel all" right as "Run all" began its next method).
        self._lock = threading.Lock()
        self._queued: set[int] = set()
        self._early: dict[int, str] = {}

    # ---- control, called from the GUI thread (thread-safe: events and tokens only) -------
    def pause(self) -> None:
        self.driver.pause()

    def resume(self) -> None:
        self.driver.resume()

    def request_stop(self, action: str = "stop") -> None:
        """End the current run: "stop" (discard) or "finish" (keep this iterate); runs sent
        but not begun begin stopped."""
        with self._lock:
            for run_id in self._queued:
                self._early[run_id] = action
        self.driver.request_stop(action)

    def queued(self, run_id: int) -> None:
        """The GUI thread sent run ``run_id`` (called before the job is queued)."""
        with self._lock:
            self._queued.add(run_id)

    def request_restart(self, request: dict[str, Any]) -> bool:
        """Restart the running solve warm with ``request``; False if no run is going."""
        return self.driver.request_restart(request)

    def shutdown(self) -> None:
        """Make the current job end at the next record and every queued job a no-op."""
        self.driver.shutdown()

    # ---- jobs, queued from the GUI thread ----------------------------------------------
    @QtCore.Slot()
    def boot(self) -> None:
        """Import the engine (torch) here, off the GUI thread, and report what it offers."""
        self.driver.boot()

    @QtCore.Slot(int, object)
    def prepare(self, job_id: int, request: dict[str, Any]) -> None:
        self.driver.prepare(job_id, request)

    @QtCore.Slot(object)
    def run(self, job: RunJob) -> None:
        with self._lock:
            self._queued.discard(job.run_id)
            action = self._early.pop(job.run_id, None)
        self.driver.run(job, action)


class ThreadBackend(QtCore.QObject):
    """Owns the solver QThread and its worker; the controller's view of the thread backend."""

    name = "thread"
    _do_boot = QtCore.Signal()
    _do_prepare = QtCore.Signal(int, object)
    _do_run = QtCore.Signal(object)

    def __init__(self, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        if sys.getswitchinterval() > GIL_SWITCH_S:
            sys.setswitchinterval(GIL_SWITCH_S)
        self._thread = QtCore.QThread()
        self._thread.setObjectName("lbi-solver")
        self.worker = EngineWorker()
        self.worker.moveToThread(self._thread)
        self._do_boot.connect(self.worker.boot)
        self._do_prepare.connect(self.worker.prepare)
        self._do_run.connect(self.worker.run)
        # The worker's signals are the backend's signals (emitted in the solver thread;
        # receivers in the GUI thread get them queued).
        self.booted = self.worker.booted
        self.prepared = self.worker.prepared
        self.progress = self.worker.progress
        self.run_done = self.worker.run_done
        self.failed = self.worker.failed
        self._thread.start()

    # EngineBackend names the solver's thread ``thread``; it hides QObject.thread() (which
    # would return the GUI thread this object lives in), deliberately.
    @property
    def thread(self) -> QtCore.QThread:  # type: ignore[override]
        return self._thread

    def boot(self) -> None:
        self._do_boot.emit()

    def prepare(self, job_id: int, request: dict[str, Any]) -> None:
        self._do_prepare.emit(job_id, request)

    def run(self, job: RunJob) -> None:
        self.worker.queued(job.run_id)
        self._do_run.emit(job)

    def pause(self) -> None:
        self.worker.pause()

    def resume(self) -> None:
        self.worker.resume()

    def request_stop(self, action: str = "stop") -> None:
        self.worker.request_stop(action)

    def request_restart(self, request: dict[str, Any]) -> bool:
        return self.worker.request_restart(request)

    def shutdown(self, timeout_ms: int = 10000) -> bool:
        """Stop the current job, then quit and join the thread (never destroy it running)."""
        self.worker.shutdown()
        self._thread.quit()
        return bool(self._thread.wait(timeout_ms))


if TYPE_CHECKING:  # the type checker confirms the backend implements the Protocol
    from lbi_gui.engine.backend import EngineBackend

    _implements: type[EngineBackend] = ThreadBackend
