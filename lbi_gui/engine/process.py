"""The process backend: one window's channel to the engine child (:mod:`lbi_gui.engine.child`).

Why: with the solver in a thread of the GUI process, painting (pyqtgraph, Python) holds the
GIL the solver needs between torch calls; a streaming window cost 10–30 % of the solver's
throughput. A child process has its own interpreter, and the GUI process never imports torch.
The child itself is owned by :mod:`lbi_gui.engine.host` (one per process, shared by windows).
:class:`ProcessBackend` offers the interface of the thread backend
(:class:`lbi_gui.engine.worker.ThreadBackend`), so the controller does not care where the
solver runs;
if no child can be started (a frozen app without multiprocessing support) it falls back to a
thread backend of its own, with a warning.
"""

from __future__ import annotations

import sys
import time
import warnings
from typing import TYPE_CHECKING, Any

from PySide6 import QtCore

from lbi_gui.engine import messages as m
from lbi_gui.engine.backend import signal_dispatcher
from lbi_gui.engine.host import EngineHost, EngineStartError, engine_host, shutdown_host
from lbi_gui.engine.messages import ErrorInfo, RunJob

__all__ = ["ProcessBackend", "EngineHost", "EngineStartError", "engine_host", "shutdown_host"]

#: How often a pending Stop is checked, and the longest a responsive child may take to end a
#: run after Stop before it is ended (terminate, then kill).
STOP_CHECK_MS = 1000
STOP_HARD_S = 30.0


class _ChannelHandle:
    """Stands in for the thread backend's QThread (``wait``/``isFinished``/``isRunning``)."""

    def __init__(self, backend: ProcessBackend) -> None:
        self._backend = backend

    def wait(self, timeout_ms: int = 10000) -> bool:
        b = self._backend
        return not b.started or b.host.closed_event(b.channel).wait(timeout_ms / 1000.0) \
            or not b.host.pid

    def isFinished(self) -> bool:  # QThread's spelling
        return self._backend.shut and self.wait(0)

    def isRunning(self) -> bool:
        return not self.isFinished()


class ProcessBackend(QtCore.QObject):
    """One window's channel to the engine child; the interface of the thread backend."""

    name = "process"
    booted = QtCore.Signal(object)
    prepared = QtCore.Signal(int, object)
    progress = QtCore.Signal(object)
    run_done = QtCore.Signal(object)
    failed = QtCore.Signal(int, object)

    def __init__(self, parent: QtCore.QObject | None = None,
                 host: EngineHost | None = None) -> None:
        super().__init__(parent)
        self.host = host or engine_host()
        self.channel = self.host.open_channel(self)
        self.started = False  # a message went to a child
        self.shut = False
        self._boot_pending = False
        self._prepare_pending: int | None = None
        self._run: int | None = None
        self._ending = False
        self._handle: Any = _ChannelHandle(self)
        self._fallback: Any = None  # a ThreadBackend once no child could be started
        self._stop_asked: tuple[int, float] | None = None  # (run id, when Stop was sent)
        self._signal = signal_dispatcher(self, "the process backend")
        self._book = m.Dispatcher("the process backend", {
            m.Booted: self._booted, m.Prepared: self._prepared, m.RunDone: self._run_done,
            m.Failed: self._failed, m.ProgressReport: lambda _msg: None})

    @property
    def thread(self) -> Any:
        return self._handle

    def _send(self, msg: Any) -> None:
        if self.shut:
            return
        if self._fallback is None:
            try:
                self.host.send(msg)
                self.started = True
                return
            except EngineStartError as exc:
                self._fall_back(exc)
        self._fallback_call(msg)

    # ---- fallback: no child can start here (e.g. a frozen app without multiprocessing) --
    def _fall_back(self, exc: Exception) -> None:
        from lbi_gui.engine.worker import ThreadBackend

        warnings.warn(f"{exc}; the solver runs in a thread of the window's process instead "
                      "(slower while the window draws)", RuntimeWarning, stacklevel=3)
        print(f"lbi-gui: {exc}; using the thread backend", file=sys.stderr)
        self.host.close_channel(self.channel, 0)
        fb = self._fallback = ThreadBackend(self)
        self._handle = fb.thread
        fb.booted.connect(self._relay_booted)
        fb.prepared.connect(self._relay_prepared)
        fb.progress.connect(self._relay_progress)
        fb.run_done.connect(self._relay_run_done)
        fb.failed.connect(self._relay_failed)

    def _fallback_call(self, msg: Any) -> None:
        fb = self._fallback
        m.Dispatcher("the process backend's fallback", {
            m.Boot: lambda _msg: fb.boot(),
            m.Prepare: lambda msg: fb.prepare(msg.job_id, msg.request),
            m.Run: lambda msg: fb.run(msg.job),
            m.Pause: lambda _msg: fb.pause(), m.Resume: lambda _msg: fb.resume(),
            m.Stop: lambda msg: fb.request_stop(msg.action),
            m.Restart: lambda msg: fb.request_restart(msg.request)})(msg)

    @QtCore.Slot(object)
    def _relay_booted(self, info: Any) -> None:
        self.deliver(m.Booted(info))

    @QtCore.Slot(int, object)
    def _relay_prepared(self, job_id: int, info: Any) -> None:
        self.deliver(m.Prepared(job_id, info))

    @QtCore.Slot(object)
    def _relay_progress(self, prog: Any) -> None:
        self.deliver(m.ProgressReport(prog))

    @QtCore.Slot(object)
    def _relay_run_done(self, out: Any) -> None:
        self.deliver(m.RunDone(out))

    @QtCore.Slot(int, object)
    def _relay_failed(self, job_id: int, err: Any) -> None:
        self.deliver(m.Failed(job_id, err))

    # ---- jobs -------------------------------------------------------------------------------
    # The bookkeeping follows the send: a send that finds the child dead first fails what the
    # dead child held, then hands this job to a fresh child, which must not be failed too.
    def boot(self) -> None:
        self._send(m.Boot(self.channel))
        self._boot_pending = True

    def prepare(self, job_id: int, request: dict[str, Any]) -> None:
        self._send(m.Prepare(self.channel, job_id, request))
        self._prepare_pending = job_id

    def run(self, job: RunJob) -> None:
        self._send(m.Run(self.channel, job))
        self._run, self._ending = job.run_id, False

    # ---- control ----------------------------------------------------------------------------
    def pause(self) -> None:
        self._send(m.Pause(self.channel))

    def resume(self) -> None:
        self._send(m.Resume(self.channel))

    def request_stop(self, action: str = "stop") -> None:
        """Cancel the run; if the child does not end it, escalate (see :meth:`_check_stop`)."""
        self._ending = True
        self._send(m.Stop(self.channel, action, self._run))
        if self._fallback is None and self._run is not None:
            self._stop_asked = (self._run, time.monotonic())
            QtCore.QTimer.singleShot(STOP_CHECK_MS, self._check_stop)

    @QtCore.Slot()
    def _check_stop(self) -> None:
        """Stop escalates: cancel (sent) -> terminate -> kill, when the child does not answer.

        A child that answers its heartbeat but has not ended the run yet (one long iteration)
        gets until STOP_HARD_S; one that does not answer is ended at once.
        """
        asked = self._stop_asked
        if asked is None or self.shut or self._run != asked[0]:
            return  # the run ended (or another one started): the cancel worked
        waited = time.monotonic() - asked[1]
        if not self.host.responsive():
            self.host.end_unresponsive(
                f"stopped responding (no heartbeat for {self.host.silence_s():.0f} s) and was "
                "ended when you pressed Stop")
        elif waited >= STOP_HARD_S:
            self.host.end_unresponsive(
                f"did not stop the run within {STOP_HARD_S:.0f} s of Stop and was ended")
        else:
            QtCore.QTimer.singleShot(STOP_CHECK_MS, self._check_stop)

    def request_restart(self, request: dict[str, Any]) -> bool:
        """Restart warm; the answer is this side's view (the child may have just ended the
        run: then the outcome carries the request that really ran)."""
        if self._run is None or self._ending or self.shut:
            return False
        if self._fallback is not None:
            return bool(self._fallback.request_restart(request))
        self._send(m.Restart(self.channel, dict(request)))
        return True

    def shutdown(self, timeout_ms: int = 10000) -> bool:
        """End this window's job in the child and wait for it; the child itself stays."""
        if self.shut:
            return True
        self.shut = True
        if self._fallback is not None:
            return bool(self._fallback.shutdown(timeout_ms))
        return self.host.close_channel(self.channel, timeout_ms)

    # ---- from the host (GUI thread) ---------------------------------------------------------
    def deliver(self, event: m.Event) -> None:
        """An engine event for this window: note which job ended, then emit its signal."""
        self._book(event)
        self._signal(event)

    def _booted(self, _event: m.Booted) -> None:
        self._boot_pending = False

    def _prepared(self, event: m.Prepared) -> None:
        if event.job_id == self._prepare_pending:
            self._prepare_pending = None

    def _run_done(self, event: m.RunDone) -> None:
        if event.outcome.run_id == self._run:
            self._run = None

    def _failed(self, event: m.Failed) -> None:
        kind, job = event.error.kind, event.job_id
        if kind == "boot":
            self._boot_pending = False
        elif kind == "prepare" and job == self._prepare_pending:
            self._prepare_pending = None
        elif kind == "run" and job == self._run:
            self._run = None

    def engine_died(self, why: str) -> None:
        """The child ended: fail what it held, with words the user can act on."""
        fix = "lbi starts a new engine process with the next request."

        def error(kind: str, what: str, request: dict | None = None) -> ErrorInfo:
            return ErrorInfo(kind=kind, exc_type="EngineProcessDied", message=(
                f"The engine process ended unexpectedly ({why}) while {what}. {fix}"),
                detail=f"engine process: {why}", is_user_error=True, unsafe=False,
                request=request)

        if self._boot_pending:
            self._boot_pending = False
            self.failed.emit(0, error("boot", "loading the engine"))
        if self._prepare_pending is not None:
            job, self._prepare_pending = self._prepare_pending, None
            self.failed.emit(job, error("prepare", "preparing the problem"))
        if self._run is not None:
            run, self._run = self._run, None
            self.failed.emit(run, error("run", "running the solver; the run is lost. "
                                               "Press Run to start it again"))


if TYPE_CHECKING:  # the type checker confirms the backend implements the Protocol
    from lbi_gui.engine.backend import EngineBackend

    _implements: type[EngineBackend] = ProcessBackend
