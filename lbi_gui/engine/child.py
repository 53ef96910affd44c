"""The engine child process: runs :class:`~lbi_gui.engine.run_driver.RunDriver` jobs, no Qt.

Why a process: in one process the solver thread needs the GIL between torch calls while the
window paints (pyqtgraph is Python), so a streaming window cost the solver 10–30 % of its
throughput. Here the solver has an interpreter of its own; the GUI process only unpickles a
few throttled messages per second.

Protocol over one duplex :func:`multiprocessing.Pipe` (pickled tuples):

* parent → child: ``("boot", ch)``, ``("prepare", ch, job_id, request)``, ``("run", ch, job)``
  (jobs, queued per channel), ``("pause", ch)``, ``("resume", ch)``,
  ``("stop", ch, action, run_id)``, ``("restart", ch, request)`` (control, applied at once),
  ``("close", ch)`` (end the channel's job and thread) and ``("exit",)``.
* child → parent: ``("hello", pid, qt_modules)`` once, then ``(kind, ch, *args)`` with kind
  one of the driver's emits (booted, prepared, progress, run_done, failed) and ``("closed", ch)``.

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

from lbi_gui.engine.run_driver import ErrorInfo, RunDriver, RunJob
from lbi_gui.engine.warmup import Warmup

#: Seconds the child waits for its job threads to end before it exits anyway.
EXIT_GRACE_S = 3.0


class _Sender:
    """Serialises sends from the job threads; a pipe the parent closed is ignored (the
    listener then sees EOF and ends the child)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._lock = threading.Lock()

    def __call__(self, msg: tuple) -> None:
        try:
            with self._lock:
                self._conn.send(msg)
        except OSError:
            return
        except Exception as exc:  # noqa: BLE001 - an unpicklable payload must not end the job
            if msg[0] in ("failed", "closed", "hello"):
                traceback.print_exc(file=sys.stderr)
                return
            job = msg[2] if msg[0] == "prepared" else getattr(msg[2], "run_id", 0)
            kind = "prepare" if msg[0] == "prepared" and job != -1 else "run"
            self(("failed", msg[1], job, ErrorInfo.from_exc(kind, exc)))


class _Channel:
    """One controller's driver and the thread that runs its jobs in order."""

    def __init__(self, ch: int, send: _Sender, warm: Warmup) -> None:
        self.ch = ch
        self._send = send
        self._warm = warm
        self.driver = RunDriver(lambda kind, *args: send((kind, ch, *args)))
        self._jobs: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._queued: set[int] = set()  # run ids received but not begun
        self._early: dict[int, str] = {}  # run id -> stop/finish asked before it began
        self._paused = False
        self.thread = threading.Thread(target=self._loop, name=f"lbi-engine-{ch}", daemon=True)
        self.thread.start()

    def submit(self, msg: tuple) -> None:
        if msg[0] in ("prepare", "run"):
            self._warm.note_job(msg[3] if msg[0] == "prepare" else msg[2].request)
        if msg[0] == "run":
            job: RunJob = msg[2]
            with self._lock:
                self._queued.add(job.run_id)
                self._paused = job.start_paused
        self._jobs.put(msg)

    def control(self, msg: tuple) -> None:
        """Called by the listener while a job may be running; events and tokens only."""
        kind = msg[0]
        if kind in ("pause", "resume"):
            with self._lock:
                self._paused = kind == "pause"
            (self.driver.pause if kind == "pause" else self.driver.resume)()
        elif kind == "stop":
            action, run_id = msg[2], msg[3]
            with self._lock:
                if run_id in self._queued:  # the run has not begun: it begins stopped
                    self._early[run_id] = action
                    return
            self.driver.request_stop(action)
        elif kind == "restart":
            self.driver.request_restart(msg[2])

    def close(self) -> None:
        self.driver.shutdown()
        self._jobs.put(None)

    def _loop(self) -> None:
        while (msg := self._jobs.get()) is not None:
            kind = msg[0]
            # The warm-up loads what these jobs need: wait for it instead of doing it twice.
            (self._warm.wait_engine if kind == "boot" else self._warm.wait_done)()
            if kind == "boot":
                self.driver.boot()
            elif kind == "prepare":
                self.driver.prepare(msg[2], msg[3])
            elif kind == "run":
                job = msg[2]
                with self._lock:
                    self._queued.discard(job.run_id)
                    action = self._early.pop(job.run_id, None)
                    job = replace(job, start_paused=self._paused)
                self.driver.run(job, action)
        self._send(("closed", self.ch))


def main(conn: Any, warm_request: dict[str, Any] | None = None) -> None:
    """Entry point of the child (``multiprocessing`` spawn target). The engine starts
    loading at once; ``warm_request`` (the window's initial problem) is warmed after it
    (:class:`~lbi_gui.engine.warmup.Warmup`)."""
    # Ctrl+C in a terminal reaches the whole process group; the GUI decides when we end.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    send = _Sender(conn)
    # Says which process this is and proves the child stayed free of Qt (tests check it).
    send(("hello", os.getpid(), sorted(m for m in sys.modules if m.startswith("PySide6"))))
    warm = Warmup(warm_request)
    channels: dict[int, _Channel] = {}
    try:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                break  # the GUI process is gone (or closed the pipe): end everything
            kind = msg[0]
            if kind == "exit":
                break
            if kind == "ping":  # heartbeat: answered by this listener, whatever jobs do
                send(("pong", msg[1]))
                continue
            ch = msg[1]
            if kind == "close":
                chan = channels.pop(ch, None)
                if chan is None:
                    send(("closed", ch))
                else:
                    chan.close()
                continue
            chan = channels.get(ch)
            if chan is None:
                chan = channels[ch] = _Channel(ch, send, warm)
            if kind in ("boot", "prepare", "run"):
                chan.submit(msg)
            else:
                chan.control(msg)
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
