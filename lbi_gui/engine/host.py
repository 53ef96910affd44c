"""The engine child of this GUI process: its start, its pipe, its reader thread, its end.

Why one host per process: the child's torch import (3–5 s) and its loaded networks are then
paid once and shared by every window and every run. The child is started with ``spawn``,
never ``fork`` (forking a process that runs Qt threads is unsafe), on the first job; ``lbi-gui``
starts it before the window instead (:mod:`lbi_gui.engine.prestart`), and the first job
adopts that one. A reader thread only receives and posts each message to the host's
GUI-thread slot through a queued signal (pytest-qt pitfall: deliveries go to GUI-thread
QObjects, not lambdas); the slot routes it to the window's
:class:`~lbi_gui.engine.process.ProcessBackend`. The child ends on app exit (``atexit`` and
:func:`shutdown_host`): asked to exit, joined with a timeout, then terminated, then killed, so
no orphan or zombie is left. If it dies, the jobs it held fail with a clear message and the
next job starts a fresh child.

Heartbeat: the GUI thread pings the child every HEARTBEAT_MS; the child's listener thread
answers at once, whatever its jobs are doing. A child that stops answering (stopped with
SIGSTOP, swapping to death, deadlocked) is noticed: :meth:`EngineHost.responsive` turns
False after STALE_S, Stop then ends it (terminate, then kill: see
``ProcessBackend.request_stop``), and after DEAD_S without an answer it is ended even without
a Stop. Its jobs fail with a message saying so, and the next job starts a fresh child.
"""

from __future__ import annotations

import atexit
import multiprocessing
import signal
import sys
import threading
import time
from typing import Any, Protocol

from PySide6 import QtCore

from lbi_gui import engine as engine_bridge
from lbi_gui.engine import messages as m
from lbi_gui.engine import prestart


class ProcessBackend(Protocol):
    """What the host needs from a window's backend (:class:`lbi_gui.engine.process.
    ProcessBackend` is the one implementation); a Protocol here instead of an import keeps
    the direction one-way: engine.process -> engine.host."""

    def deliver(self, event: m.Event) -> None: ...

    def engine_died(self, why: str) -> None: ...

#: Seconds to wait for the child to exit by itself before terminate(), then kill().
EXIT_TIMEOUT_S = 3.0
#: At most this long a closing window waits for its job in the child to end: a job that
#: cannot be cancelled (loading a network) goes on in the child, which nothing then waits for.
CLOSE_WAIT_MS = 2000
#: Heartbeat period; a child silent for STALE_S counts as unresponsive (Stop then ends it);
#: one silent for DEAD_S is ended without waiting for a Stop. DEAD_S is generous because a
#: child may hold its interpreter lock for seconds (numba compiling a kernel).
HEARTBEAT_MS = 1000
STALE_S = 4.0
DEAD_S = 45.0


class EngineStartError(RuntimeError):
    """The child process could not be started (e.g. a frozen app without multiprocessing)."""


class EngineHost(QtCore.QObject):
    """The engine child of this GUI process, its pipe and its reader thread."""

    _message = QtCore.Signal(int, object)  # generation, message: reader thread -> GUI thread

    def __init__(self) -> None:
        super().__init__()
        self._proc: Any = None
        self._conn: Any = None
        self._reader: threading.Thread | None = None
        self._gen = 0
        self._alive = False
        self._stopping = False
        self._send_lock = threading.Lock()
        self._channels: dict[int, ProcessBackend] = {}
        self._closed: dict[int, threading.Event] = {}
        self._next_channel = 0
        self.hello: m.Hello | None = None  # the child's pid and the Qt modules it imported
        self._message.connect(self._dispatch, QtCore.Qt.ConnectionType.QueuedConnection)
        self._route = m.Dispatcher("the engine host", {
            m.Died: lambda _msg: self._on_died(self._gen),
            m.Hello: lambda msg: setattr(self, "hello", msg),
            m.Closed: lambda _msg: None,  # the reader thread has set its event already
            **{kind: self._to_channel for kind in m.EVENTS}})
        self._last_pong = time.monotonic()
        self._ping_no = 0
        self._end_reason: str | None = None  # why this side ended the child (unresponsive)
        self._beat = QtCore.QTimer(self)
        self._beat.setInterval(HEARTBEAT_MS)
        self._beat.timeout.connect(self._heartbeat)

    # ---- child life -------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._alive and self._proc is not None else None

    def ensure_started(self) -> None:
        """Start a child unless one is running; raises :class:`EngineStartError`."""
        if self._alive and self._proc is not None:
            if self._proc.is_alive():
                return
            self._on_died(self._gen)  # dead, and the reader has not said so yet
        self._reap()
        # The app may have started the child before the window (prestart): adopt it.
        pending = prestart.take()
        if pending is not None:
            proc, parent_conn = pending
        else:
            try:
                ctx = multiprocessing.get_context("spawn")
                parent_conn, child_conn = ctx.Pipe(duplex=True)
                from lbi_gui.engine import child as engine_child

                proc = ctx.Process(target=engine_child.main, args=(child_conn,), daemon=True,
                                   name="lbi-engine")
                proc.start()
            except Exception as exc:  # any reason means "use the thread backend"
                raise EngineStartError(f"the engine process could not be started: {exc}") \
                    from exc
            child_conn.close()  # only the child holds its end: its death reads as EOF here
        self._gen += 1
        self._proc, self._conn, self._alive, self._stopping = proc, parent_conn, True, False
        for ch in self._channels:
            self._event(ch).clear()
        self._reader = threading.Thread(target=self._read, args=(parent_conn, self._gen),
                                        name="lbi-engine-reader", daemon=True)
        self._reader.start()
        self._last_pong, self._end_reason = time.monotonic(), None
        if QtCore.QThread.currentThread() is self.thread():
            self._beat.start()

    # ---- heartbeat --------------------------------------------------------------------------
    def silence_s(self) -> float:
        """Seconds since the child last answered a ping (0 when no child runs)."""
        return time.monotonic() - self._last_pong if self._alive else 0.0

    def responsive(self) -> bool:
        return not self._alive or self.silence_s() < STALE_S

    @QtCore.Slot()
    def _heartbeat(self) -> None:
        if not self._alive or self._proc is None:
            self._beat.stop()
            return
        if self.silence_s() > DEAD_S:
            self.end_unresponsive(f"it stopped responding for {DEAD_S:.0f} s and was ended")
            return
        self._ping_no += 1
        try:
            if self._send_lock.acquire(timeout=0.2):  # never block the GUI thread on a pipe
                try:
                    self._conn.send(m.Ping(self._ping_no))
                finally:
                    self._send_lock.release()
        except (OSError, ValueError):
            pass  # the reader reports the death

    def end_unresponsive(self, why: str) -> None:
        """End a child that does not answer: SIGTERM, then SIGKILL (which also ends a
        SIGSTOPped process); its jobs fail with ``why``. The next job starts a fresh one."""
        proc = self._proc
        if not self._alive or proc is None:
            return
        self._end_reason = why
        print(f"lbi-gui: the engine process (pid {proc.pid}) {why}", file=sys.stderr)
        proc.terminate()
        proc.join(1.0)
        if proc.is_alive():
            proc.kill()
            proc.join(2.0)
        self._on_died(self._gen)

    def _read(self, conn: Any, gen: int) -> None:
        """Reader thread: receive, post to the GUI thread; never touches widgets."""
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                break
            except Exception:  # a message that does not unpickle
                import traceback

                traceback.print_exc(file=sys.stderr)
                continue
            if isinstance(msg, m.Pong):
                if gen == self._gen:
                    self._last_pong = time.monotonic()
                continue
            if isinstance(msg, m.Closed):
                self._event(msg.ch).set()
            self._message.emit(gen, msg)
        if gen == self._gen:  # (a replaced child's reader must not touch the new one's)
            for event in list(self._closed.values()):
                event.set()  # nobody will confirm a close any more
        if not self._stopping:
            self._message.emit(gen, m.Died())

    def _event(self, ch: int) -> threading.Event:
        return self._closed.setdefault(ch, threading.Event())

    def send(self, msg: object) -> None:
        """Send to the child, starting one first if there is none (a new or a dead one)."""
        self.ensure_started()
        try:
            with self._send_lock:
                self._conn.send(msg)
        except (OSError, ValueError):
            # The child died and the reader has not said so yet: fail what it held now,
            # then give this message to a fresh child.
            self._on_died(self._gen)
            self.ensure_started()
            with self._send_lock:
                self._conn.send(msg)

    def _reap(self) -> int | None:
        """Join a child that ended (no zombie); its exit code."""
        proc = self._proc
        if proc is None:
            return None
        proc.join(1.0)
        if proc.is_alive():
            return None
        return proc.exitcode

    def shutdown(self, timeout: float = EXIT_TIMEOUT_S) -> None:
        """Ask the child to exit; join, terminate, kill as needed. Safe to call twice."""
        proc, conn = self._proc, self._conn
        self._stopping, self._alive = True, False
        self._beat.stop()
        if proc is None:
            return
        try:
            if self._send_lock.acquire(timeout=1.0):  # a stopped child may not read
                try:
                    conn.send(m.Exit())
                finally:
                    self._send_lock.release()
        except (OSError, ValueError):
            pass
        prestart.end_child(proc, timeout)
        conn.close()
        if self._reader is not None:
            self._reader.join(1.0)

    # ---- channels ---------------------------------------------------------------------------
    def open_channel(self, backend: ProcessBackend) -> int:
        self._next_channel += 1
        self._channels[self._next_channel] = backend
        self._event(self._next_channel)
        engine_bridge.hold_data_view(+1)
        return self._next_channel

    def close_channel(self, ch: int, timeout_ms: int) -> bool:
        """End the channel's job in the child and wait for it (``timeout_ms``)."""
        if self._channels.pop(ch, None) is None:
            return True
        engine_bridge.hold_data_view(-1)
        event = self._event(ch)
        if not self._alive:
            event.set()
            return True
        try:
            with self._send_lock:
                self._conn.send(m.Close(ch))
        except (OSError, ValueError):
            event.set()
            return True
        return event.wait(min(timeout_ms, CLOSE_WAIT_MS) / 1000.0)

    def closed_event(self, ch: int) -> threading.Event:
        return self._event(ch)

    @QtCore.Slot(int, object)
    def _dispatch(self, gen: int, msg: object) -> None:
        """GUI thread: route one message to its window's backend."""
        if gen != self._gen:
            return  # from a child that has since been replaced
        try:
            self._route(msg)
        except m.UnknownMessageError:
            import traceback

            traceback.print_exc(file=sys.stderr)  # a bug, not the user's: keep the window

    def _to_channel(self, event: m.Event) -> None:
        backend = self._channels.get(event.ch)
        if backend is not None:
            backend.deliver(event)

    def _on_died(self, gen: int) -> None:
        if gen != self._gen or not self._alive:
            return
        self._alive = False
        self._beat.stop()
        code = self._reap()
        if self._end_reason is not None:
            why, self._end_reason = self._end_reason, None
        elif code is not None and code < 0:
            try:
                why = f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                why = f"killed by signal {-code}"
        else:
            why = f"exit code {code}"
        print(f"lbi-gui: the engine process ended unexpectedly ({why})", file=sys.stderr)
        for backend in list(self._channels.values()):
            backend.engine_died(why)


_HOST: EngineHost | None = None


def engine_host() -> EngineHost:
    """The process's engine host (created on first use; shut down at exit)."""
    global _HOST
    if _HOST is None:
        _HOST = EngineHost()
        atexit.register(shutdown_host)
    return _HOST


def shutdown_host() -> None:
    """End the engine child, if any (app exit; tests). The next job starts a new one."""
    if _HOST is not None:
        _HOST.shutdown()
