"""The engine child, started before the window and warmed while the window builds.

Why: the first curve waits for the child's torch import (~3 s), loading the network and its
operator norms (~1 s) and the first iteration's one-time work (numba's kernel cache, ~1 s).
Building the window (PySide6, pyqtgraph, the panels) takes 1–3 s on the GUI process's core.
Started first, the child does its part on the other core meanwhile, so the two overlap.

Parent side (this module is imported before PySide6, so it imports only the standard
library): :func:`prestart` spawns the child as :mod:`lbi_gui.engine.host` would;
:meth:`EngineHost.ensure_started` adopts it with :func:`take`. A child that nobody adopts (the
thread backend was chosen after all) is ended by :func:`discard` (also ``atexit``).

Child side: :class:`lbi_gui.engine.warmup.Warmup` imports the engine at once and warms the
request given here (the window's initial problem).
"""

from __future__ import annotations

import atexit
import multiprocessing
import sys
from typing import Any

_PENDING: tuple[Any, Any] | None = None  # (process, parent end of the pipe)


def _child_entry(conn: Any, warm_request: dict[str, Any] | None) -> None:
    """Spawn target; a trampoline so the parent need not import the child's modules."""
    from lbi_gui.engine import child

    child.main(conn, warm_request)


def prestart(warm_request: dict[str, Any] | None = None) -> bool:
    """Spawn the engine child now (once); False when it cannot start (the host then tries
    again itself, and falls back to a thread)."""
    global _PENDING
    if _PENDING is not None:
        return True
    try:
        ctx = multiprocessing.get_context("spawn")
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        proc = ctx.Process(target=_child_entry, args=(child_conn, warm_request), daemon=True,
                           name="lbi-engine")
        proc.start()
    except Exception as exc:
        print(f"lbi-gui: the engine process could not be started early ({exc})",
              file=sys.stderr)
        return False
    child_conn.close()  # only the child holds its end: its death reads as EOF here
    _PENDING = (proc, parent_conn)
    atexit.register(discard)
    return True


def take() -> tuple[Any, Any] | None:
    """The pre-started (process, connection), once; None if there is none or it died."""
    global _PENDING
    pending, _PENDING = _PENDING, None
    if pending is None:
        return None
    proc, conn = pending
    if not proc.is_alive():
        conn.close()
        proc.join(0.1)
        return None
    return pending


def discard(timeout: float = 3.0) -> None:
    """End a pre-started child that no window adopted (asked, then ended)."""
    pending = take()
    if pending is None:
        return
    proc, conn = pending
    from lbi_gui.engine import messages as m  # (numpy: only once Qt is up or at exit)

    try:
        conn.send(m.Exit())
    except (OSError, ValueError):
        pass
    end_child(proc, timeout)
    conn.close()


def end_child(proc: Any, timeout: float) -> None:
    """Wait ``timeout`` s for a child asked to exit, then terminate it, then kill it."""
    proc.join(timeout)
    if proc.is_alive():
        proc.terminate()
        proc.join(1.0)
    if proc.is_alive():
        proc.kill()
        proc.join(1.0)
