"""The engine child process: runs :class:`~lbi_gui.engine.run_driver.RunDriver` jobs, no Qt.

Why a process: in one process the solver thread needs the GIL between torch calls while the
window paints (pyqtgraph is Python), so a streaming window cost the solver 10–30 % of its
throughput. Here the solver has an interpreter of its own; the GUI process only unpickles a
few throttled messages per second.

Protocol over one duplex :func:`multiprocessing.Pipe`: the pickled dataclasses of
:mod:`lbi_gui.engine.messages`.

* parent → child: jobs ``Boot``, ``Prepare``, ``Run`` (queued per channel); control
  ``Pause``, ``Resume``, ``Stop``, ``Restart`` (applied at once); ``Close`` (end the
  channel's job and thread), ``Ping`` (heartbeat) and ``Exit``.
* child → parent: ``Hello`` once, then the driver's events (``Booted``, ``Prepared``,
  ``ProgressReport``, ``RunDone``, ``Failed``) stamped with their channel, ``Closed`` and
  ``Pong``.

A channel is one window's controller: each has its own driver and job thread (windows run in
parallel, as with the thread backend) while loaded networks are shared by all. The main thread
only listens, so control takes effect while a job runs. When the parent goes away (the pipe
reaches EOF) every job is cancelled and the child exits: it is never left orphaned.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import traceback
from dataclasses import replace
from typing import Any

from lbi_gui.engine import messages as m
from lbi_gui.engine.run_driver import ErrorInfo, RunDriver
from lbi_gui.engine.warmup import Warmup

#: Seconds the child waits for its job threads to end before it exits anyway.
EXIT_GRACE_S = 3.0


class _Sender:
    """Serialises sends from the job threads; a pipe the parent closed is ignored (the
    listener then sees EOF and ends the child)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._lock = threading.Lock()

    def __call__(self, msg: Any) -> None:
        try:
            with self._lock:
                self._conn.send(msg)
        except OSError:
            return
        except Exception as exc:  # an unpicklable payload must not end the job
            if not isinstance(msg, m.EVENTS) or isinstance(msg, m.Failed):
                traceback.print_exc(file=sys.stderr)
                return
            if isinstance(msg, m.Booted):
                job, kind = 0, "boot"  # the window must not wait for a boot forever
            elif isinstance(msg, m.Prepared):
                job, kind = msg.job_id, "prepare" if msg.job_id != -1 else "run"
            else:
                prog = msg.progress if isinstance(msg, m.ProgressReport) else msg.outcome
                job, kind = prog.run_id, "run"
            self(m.Failed(job, ErrorInfo.from_exc(kind, exc), ch=msg.ch))


class _Channel:
    """One controller's driver and the thread that runs its jobs in order."""

    def __init__(self, ch: int, send: _Sender, warm: Warmup | None = None) -> None:
        self.ch = ch
        self._send = send
        self._warm = warm if warm is not None else Warmup(None, start=False)
        # the driver's events leave with this channel's number on them
        self.driver = RunDriver(lambda event: send(replace(event, ch=ch)))
        self._jobs: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._queued: set[int] = set()  # run ids received but not begun
        self._early: dict[int, str] = {}  # run id -> stop/finish asked before it began
        self._paused = False
        self.control = m.Dispatcher("the engine channel", {
            m.Pause: self._pause, m.Resume: self._pause, m.Stop: self._stop,
            m.Restart: lambda msg: self.driver.request_restart(msg.request)})
        self._run_job = m.Dispatcher("the engine channel's job thread", {
            m.Boot: lambda _msg: self.driver.boot(),
            m.Prepare: lambda msg: self.driver.prepare(msg.job_id, msg.request),
            m.Run: self._run})
        self.thread = threading.Thread(target=self._loop, name=f"lbi-engine-{ch}", daemon=True)
        self.thread.start()

    def submit(self, msg: m.Boot | m.Prepare | m.Run) -> None:
        if isinstance(msg, (m.Prepare, m.Run)):
            self._warm.note_job(msg.request if isinstance(msg, m.Prepare) else msg.job.request,
                                run=isinstance(msg, m.Run))
        if isinstance(msg, m.Run):
            with self._lock:
                self._queued.add(msg.job.run_id)
                self._paused = msg.job.start_paused
        self._jobs.put(msg)

    # ---- control: called by the listener while a job may run; events and tokens only ----
    def _pause(self, msg: m.Pause | m.Resume) -> None:
        pause = isinstance(msg, m.Pause)
        with self._lock:
            self._paused = pause
        (self.driver.pause if pause else self.driver.resume)()

    def _stop(self, msg: m.Stop) -> None:
        with self._lock:
            if msg.run_id in self._queued:  # the run has not begun: it begins stopped
                self._early[msg.run_id] = msg.action
                return
        self.driver.request_stop(msg.action)

    def _run_queued(self) -> bool:
        with self._lock:
            return bool(self._queued)

    def close(self) -> None:
        self.driver.shutdown()
        self._jobs.put(None)

    # ---- the job thread ------------------------------------------------------------------
    def _run(self, msg: m.Run) -> None:
        job = msg.job
        with self._lock:
            self._queued.discard(job.run_id)
            action = self._early.pop(job.run_id, None)
            job = replace(job, start_paused=self._paused)
        self.driver.run(job, action)

    def _loop(self) -> None:
        while (msg := self._jobs.get()) is not None:
            # The warm-up loads what these jobs need: wait for it instead of doing it twice.
            # A run (and a prepare queued before it) waits for the loaded network only: the
            # warm-up's iteration runs at low priority and would hold the run's first curve.
            if isinstance(msg, m.Boot):
                self._warm.wait_engine()
            elif isinstance(msg, m.Run) or self._run_queued():
                self._warm.wait_prepared()
            else:
                self._warm.wait_done()
            self._run_job(msg)
        self._send(m.Closed(self.ch))


def main(conn: Any, warm_request: dict[str, Any] | None = None) -> None:
    """Entry point of the child (``multiprocessing`` spawn target). The engine starts
    loading at once; ``warm_request`` (the window's initial problem) is warmed after it
    (:class:`~lbi_gui.engine.warmup.Warmup`)."""
    # Ctrl+C in a terminal reaches the whole process group; the GUI decides when we end.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    send = _Sender(conn)
    # Says which process this is and proves the child stayed free of Qt (tests check it).
    send(m.Hello(os.getpid(), tuple(sorted(x for x in sys.modules if x.startswith("PySide6")))))
    warm = Warmup(warm_request)
    channels: dict[int, _Channel] = {}

    def channel(ch: int) -> _Channel:
        chan = channels.get(ch)
        if chan is None:
            chan = channels[ch] = _Channel(ch, send, warm)
        return chan

    def close(msg: m.Close) -> None:
        chan = channels.pop(msg.ch, None)
        if chan is None:
            send(m.Closed(msg.ch))
        else:
            chan.close()

    listen = m.Dispatcher("the engine child", {
        # heartbeat: answered by this listener, whatever the jobs do
        m.Ping: lambda msg: send(m.Pong(msg.seq)),
        m.Close: close,
        **{kind: lambda msg: channel(msg.ch).submit(msg) for kind in m.JOBS},
        **{kind: lambda msg: channel(msg.ch).control(msg) for kind in m.CONTROLS},
    })
    try:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                break  # the GUI process is gone (or closed the pipe): end everything
            if isinstance(msg, m.Exit):
                break
            try:
                listen(msg)
            except m.UnknownMessageError:
                traceback.print_exc(file=sys.stderr)  # a bug on the GUI side; keep serving
    finally:
        for chan in channels.values():
            chan.close()
        for chan in channels.values():
            chan.thread.join(EXIT_GRACE_S / max(1, len(channels)))
        sys.stdout.flush()
        sys.stderr.flush()
        conn.close()
        # Job threads stuck in a long torch call must not keep the process alive.
        os._exit(0)
