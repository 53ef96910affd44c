"""The GUI-thread side of the solver: jobs out, throttled view updates in.

Why a separate object: the window should only say "run this request", "pause", "α changed";
job ids, the 30 Hz redraw throttle, run queues ("run all methods") and a clean shutdown live
here. Where the solver runs is a backend's business (:func:`make_backend`): a child process
(:mod:`lbi_gui.engine.process`, the default: the window's painting cannot slow it) or a thread
of this process (:mod:`lbi_gui.engine.worker`). Both implement
:class:`~lbi_gui.engine.backend.EngineBackend`, the only face of a backend used here; their
signals are connected to slots of this GUI-thread QObject (never lambdas), so queued
deliveries are never lost when a thread quits.
"""

from __future__ import annotations

from typing import Any

from PySide6 import QtCore

from lbi_gui import engine as engine_bridge
from lbi_gui.engine.backend import EngineBackend
from lbi_gui.engine.messages import ErrorInfo, PreparedInfo, Progress, RunJob, RunOutcome
from lbi_gui.model.progress import RunProgress
from lbi_gui.model.run_control import RunQueue, SpeedMeter, classify_change
from lbi_gui.model.runs import CurveStore, RunResult

#: Milliseconds between two window redraws (at most ~30 per second).
REDRAW_MS = 33


def make_backend(name: str | None = None,
                 parent: QtCore.QObject | None = None) -> EngineBackend:
    """The solver backend ``name`` ("process" | "thread"; None: the setting).

    An engine replaced in this process (tests' fake :data:`lbi_gui.engine.ENGINE_FACTORY`)
    exists only here, so it always gets the thread backend.
    """
    from lbi_gui.settings import engine_backend

    name = name or engine_backend()
    if name == "process" and engine_bridge.ENGINE_FACTORY is engine_bridge.default_factory():
        from lbi_gui.engine.process import ProcessBackend

        return ProcessBackend(parent)
    from lbi_gui.engine.worker import ThreadBackend

    return ThreadBackend(parent)


class RunController(QtCore.QObject):
    """Owns the solver backend; every signal here is emitted in the GUI thread."""

    booted = QtCore.Signal(object)
    boot_failed = QtCore.Signal(object)
    prepared = QtCore.Signal(object, bool)  # PreparedInfo of the current problem, from a run?
    prepare_failed = QtCore.Signal(object)  # ErrorInfo
    view_update = QtCore.Signal(object)  # Progress (latest images; curves are in .curves)
    restart_marked = QtCore.Signal(int, str)
    run_finished = QtCore.Signal(object)  # RunResult (also for "stop": see user_action)
    run_failed = QtCore.Signal(object)  # ErrorInfo
    state_changed = QtCore.Signal(str)  # booting | idle | preparing | running | paused
    loading = QtCore.Signal(dict)  # the request a prepare or run is about to load
    queue_done = QtCore.Signal(list)  # ErrorInfo list of a "run all" batch
    queue_progress = QtCore.Signal(int, int, str)  # "run all": number (1-based), total, method

    def __init__(self, parent: QtCore.QObject | None = None, backend: str | None = None) -> None:
        super().__init__(parent)
        self.backend: EngineBackend = make_backend(backend, self)
        self.worker = self.backend  # the name older code and tests use
        self.backend.booted.connect(self._on_booted)
        self.backend.prepared.connect(self._on_prepared)
        self.backend.progress.connect(self._on_progress)
        self.backend.run_done.connect(self._on_run_done)
        self.backend.failed.connect(self._on_failed)
        self._redraw = QtCore.QTimer(self)
        self._redraw.setSingleShot(True)
        self._redraw.setInterval(REDRAW_MS)
        self._redraw.timeout.connect(self._flush_view)
        self.engine_info: dict[str, Any] | None = None
        self.curves = CurveStore()
        self.latest: Progress | None = None
        self.last_result: RunResult | None = None
        self.run_request: dict[str, Any] | None = None
        self.run_info: PreparedInfo | None = None
        self._speed = SpeedMeter()
        #: The current run's stage and time left (the engine's estimate), for the status line.
        self.progress = RunProgress({})
        self._state = "booting"
        self._paused = False
        self._job_id = 0
        self._latest_prepare = 0
        self._run_id = 0
        self._active_run: int | None = None
        self._queue = RunQueue()
        self._shut = False
        self.boot_requested = False

    # ---- state ----------------------------------------------------------------------------
    @property
    def state(self) -> str:
        return self._state

    @property
    def running(self) -> bool:
        return self._active_run is not None

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def iterations_per_second(self) -> float:
        """The current run's speed (0 before its first points)."""
        return self._speed.rate

    def _set_state(self, state: str) -> None:
        if state != self._state:
            self._state = state
            self.state_changed.emit(state)

    # ---- commands ---------------------------------------------------------------------------
    def boot(self) -> None:
        """Load the engine (once): the app calls this as early as it can (see app.main)."""
        if not self.boot_requested:
            self.boot_requested = True
            self.backend.boot()

    def prepare(self, request: dict[str, Any]) -> int:
        """Load/prepare ``request`` for display; a newer prepare makes older results stale."""
        self._job_id += 1
        self._latest_prepare = self._job_id
        if not self.running:
            self._set_state("preparing")
        self.loading.emit(dict(request))
        self.backend.prepare(self._job_id, dict(request))
        return self._job_id

    def start(self, request: dict[str, Any], *, paused: bool = False) -> int:
        """Start a fresh (cold) run; a running one is stopped first (not kept)."""
        if self.running:
            self.backend.request_stop("stop")
        self._run_id += 1
        self._active_run = self._run_id
        self.run_request = dict(request)
        self.curves = CurveStore()
        self.latest = None
        self._speed.reset()
        self.progress = RunProgress(request)
        self._paused = paused
        self._set_state("paused" if paused else "running")
        self.loading.emit(dict(request))
        self.backend.run(RunJob(self._run_id, dict(request), start_paused=paused))
        return self._run_id

    def run_all(self, request: dict[str, Any], methods: list[str]) -> None:
        """Run every method on the same problem, one after another (each cold)."""
        self._queue.start(request, methods)
        self._next_in_queue()

    @property
    def queue_active(self) -> bool:
        return self._queue.active

    def cancel_queue(self) -> None:
        """Cancel "run all": the running method is stopped (discarded), the rest never run."""
        self.stop()

    def pause(self) -> None:
        if self.running and not self._paused:
            self._paused = True
            self.backend.pause()
            self._set_state("paused")

    def resume(self) -> None:
        if self.running and self._paused:
            self._paused = False
            self.backend.resume()
            self._set_state("running")

    def toggle_pause(self) -> None:
        (self.resume if self._paused else self.pause)()

    def stop(self) -> None:
        """End the run and discard it (the last iterate stays on screen)."""
        self._queue.clear()
        if self.running:
            self.backend.request_stop("stop")

    def finish_now(self) -> None:
        """End the run and keep the current iterate as its result."""
        self._queue.clear()
        if self.running:
            self.backend.request_stop("finish")

    def abandon(self) -> None:
        """Stop the run and ignore everything it still sends (reset, session loading)."""
        self._queue.clear()
        self._queue.active = False
        if self.running:
            self.backend.request_stop("stop")
        self._active_run = None
        self._paused = False
        self._redraw.stop()
        self._set_state("idle" if self.engine_info is not None else "booting")

    def reset(self) -> None:
        """Stop and forget the current run's curves and iterate."""
        self.abandon()
        self.curves = CurveStore()
        self.latest = None
        self._speed.reset()
        self.progress = RunProgress({})

    def change(self, old: dict[str, Any], new: dict[str, Any]) -> str:
        """React to edited parameters (the rule: :func:`~lbi_gui.model.run_control.
        classify_change`); returns "restart", "stopped", "prepare" or "none"."""
        what = classify_change(old, new, running=self.running)
        if what == "stop":
            self.stop()
            self.prepare(new)
            return "stopped"
        if what == "restart":
            if self.backend.request_restart(new):
                self.run_request = dict(new)
                self.progress.follow(new)
                return "restart"
            return "none"
        if what == "prepare":
            self.prepare(new)
            return "prepare"
        return "none"

    def adopt_history(self, curves: CurveStore | None, run_ids: list[int]) -> None:
        """Take over curves and run numbering from a loaded session."""
        self.curves = curves if curves is not None else CurveStore()
        self.latest = None
        self._run_id = max([self._run_id, *run_ids])

    def shutdown(self, timeout_ms: int = 10000) -> bool:
        """Stop everything and wait for the solver's job to end; safe to call twice."""
        if self._shut:
            return True
        self._shut = True
        self._queue.clear()
        self._redraw.stop()
        ok = self.backend.shutdown(timeout_ms)
        self._active_run = None
        return bool(ok)

    @property
    def thread(self) -> Any:
        """The solver's QThread (thread backend) or a stand-in with ``wait``/``isFinished``
        that reports this window's channel in the engine process as ended."""
        return self.backend.thread

    # ---- worker signals (GUI thread) ------------------------------------------------------
    @QtCore.Slot(object)
    def _on_booted(self, info: dict[str, Any]) -> None:
        self.engine_info = info
        self._set_state("idle")
        self.booted.emit(info)

    @QtCore.Slot(int, object)
    def _on_prepared(self, job_id: int, info: PreparedInfo) -> None:
        if job_id != -1 and job_id != self._latest_prepare:
            return  # a newer prepare was requested meanwhile
        if job_id == -1:
            self.run_info = info
        elif not self.running:
            self._set_state("idle")
        self.prepared.emit(info, job_id == -1)

    @QtCore.Slot(object)
    def _on_progress(self, prog: Progress) -> None:
        if prog.run_id != self._active_run:
            return
        self.curves.extend(prog.points)
        self.progress.feed(prog.points)
        if prog.points:
            last = prog.points[-1]
            self._speed.update(last["iteration"], last["elapsed"])
        for it, what in prog.restarts:
            self.curves.mark_restart(it, what)
            self.restart_marked.emit(it, what)
        if prog.prepared is not None:
            self.run_info = prog.prepared
            self.prepared.emit(prog.prepared, True)
        self.latest = prog
        if not self._redraw.isActive():
            self._redraw.start()

    @QtCore.Slot()
    def _flush_view(self) -> None:
        if self.latest is not None:
            self.view_update.emit(self.latest)

    @QtCore.Slot(object)
    def _on_run_done(self, out: RunOutcome) -> None:
        if out.run_id != self._active_run:
            return
        self._redraw.stop()  # run_finished draws the final state once (no flush first)
        self._active_run = None
        self._paused = False
        result = RunResult(run_id=out.run_id, request=out.request, stop_reason=out.stop_reason,
                           iterations=out.iterations, elapsed=out.elapsed, metrics=out.metrics,
                           x_raw=out.x_raw, x_display=out.x_display, curves=self.curves,
                           user_action=out.user_action,
                           decoder_psnr=self.run_info.decoder_psnr if self.run_info else None,
                           segments=list(out.segments),
                           truth=self.run_info.truth if self.run_info else None,
                           **_problem_of(self.run_info))
        self.last_result = result
        self._set_state("idle")
        self.run_finished.emit(result)
        self._next_in_queue()

    @QtCore.Slot(int, object)
    def _on_failed(self, job_id: int, err: ErrorInfo) -> None:
        if err.kind == "boot":
            self._set_state("idle")
            self.boot_failed.emit(err)
        elif err.kind == "prepare":
            if job_id == self._latest_prepare:
                if not self.running:
                    self._set_state("idle")
                self.prepare_failed.emit(err)
        elif job_id == self._active_run:
            self._active_run = None
            self._paused = False
            self._set_state("idle")
            if self._queue.active:
                self._queue.errors.append(err)
                self._next_in_queue()
            else:
                self.run_failed.emit(err)

    def _next_in_queue(self) -> None:
        step = self._queue.next()
        if step is not None:
            number, request = step
            self.queue_progress.emit(number, self._queue.total, str(request["method"]))
            self.start(request)
            return
        errors = self._queue.finish()
        if errors is not None:
            self.queue_done.emit(errors)


def _problem_of(info: PreparedInfo | None) -> dict[str, Any]:
    """What a RunResult keeps of its problem, so an export writes what ``lbi invert`` does."""
    if info is None:
        return {}
    return {"network": {"name": info.network_name, "sha256": info.sha256,
                        "input_shape": list(info.input_shape),
                        "output_shape": list(info.output_shape), "layers": len(info.layers),
                        "has_decoder": info.has_decoder,
                        **_rewrites_of(info)},
            "preprocessing": dict(info.preprocessing or {}), "decoder": info.decoder}


def _rewrites_of(info: PreparedInfo) -> dict[str, Any]:
    """result.json's "rewrites" and "lifted_layers_added", as ``lbi invert`` writes them."""
    rewrites = list(((info.card or {}).get("lifting") or {}).get("rewrites") or [])
    if not rewrites:
        return {}
    return {"rewrites": rewrites,
            "lifted_layers_added": sum(int(r["lifted_layers_added"]) for r in rewrites)}
