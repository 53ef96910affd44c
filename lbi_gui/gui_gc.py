"""Python's cyclic garbage collector runs only on the GUI thread while a window exists.

Why: automatic collection runs in whichever thread happens to allocate. When the solver
thread (or the engine host's reader thread) triggers it and it frees a Qt wrapper that belongs
to the GUI thread, PySide disconnects the object's signals under a Qt mutex and then needs the
GIL, while the GUI thread holds the GIL and waits for that mutex: a deadlock (seen in CI:
``gc_collect_main`` on the solver thread in ``QObject::disconnect`` waiting for the GIL, the GUI
thread in ``QMetaObject::disconnect`` waiting for the mutex). pyqtgraph's GarbageCollector
turns automatic collection off and collects from a timer on the thread that installs it.
"""

from __future__ import annotations

from typing import Any

_COLLECTOR: Any = None

#: Seconds between collections on the GUI thread (each is a generation-0 check: microseconds).
INTERVAL_S = 0.5


def install() -> None:
    """Collect garbage only on the calling (GUI) thread, from now on; idempotent."""
    global _COLLECTOR
    if _COLLECTOR is None:
        from pyqtgraph.util.garbage_collector import GarbageCollector

        _COLLECTOR = GarbageCollector(interval=INTERVAL_S)


def installed() -> bool:
    """True once :func:`install` has run in this process."""
    return _COLLECTOR is not None
