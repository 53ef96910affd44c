"""The engine child's warm-up: load the engine at once, then warm the first problem.

:class:`Warmup` runs in a thread of the child (:mod:`lbi_gui.engine.child`). It imports the
engine at once, then prepares the window's initial problem (the loaded network is cached for
the real jobs) and pulls one record from it (lazy imports, the compiled TV prox's cache),
then throws that record away. The real jobs wait for it (:meth:`Warmup.wait_engine`,
:meth:`Warmup.wait_prepared`, :meth:`Warmup.wait_done`): they would do the same work anyway,
and must not do it twice in parallel. A job for another network makes the warm-up skip its
remaining steps; a run waits for the loaded network only, never for the warm-up's iteration.
The first curve is the real run's: nothing the warm-up computes is shown or reused except the
loaded network and the process's warmed caches.

The warm-up thread keeps the normal priority (WARM_NICE 0). It ran at nice +10 so that the
window was built first on a shared CPU, but the engine's import and the first prepare are on
the path to the first iterate, and beside CPU-bound work at nice 0 a +10 thread gets about a
tenth of a core's share: with two CPU-bound processes beside it on the 2-core machine the
engine was ready after 78 s for 3.3 CPU-seconds of work, the first curve at 109 s. At nice
0 the first curve comes within about twice the quiet launch's time
(``python -m benchmarks.studies.bench_startup_busy``: benchmarks/results/startup_busy.md
has the seconds and the load they were measured at).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

#: Added to the warm-up thread's nice value (Linux: per thread; 0 = unchanged; see above).
WARM_NICE = 0


class Warmup:
    """Child side: load the engine, then warm the initial problem, in a thread of its own."""

    def __init__(self, request: dict[str, Any] | None, *, start: bool = True) -> None:
        """``start=False``: nothing to warm, jobs never wait (a channel made on its own)."""
        self.request = dict(request) if request else None
        self.engine_ready = threading.Event()
        #: The warm-up's prepare ended (or will not happen): the loaded network is cached.
        self.prepared = threading.Event()
        self.done = threading.Event()
        self._skip = threading.Event()
        self.steps: list[str] = []  # what was done (tests)
        if not start:
            self.engine_ready.set()
            self.prepared.set()
            self.done.set()
            return
        threading.Thread(target=self._run, name="lbi-engine-warmup", daemon=True).start()

    def _run(self) -> None:
        if WARM_NICE and sys.platform.startswith("linux"):
            try:  # a thread id: only this thread (Linux's nice is per thread)
                tid = threading.get_native_id()
                os.setpriority(os.PRIO_PROCESS, tid,
                               os.getpriority(os.PRIO_PROCESS, tid) + WARM_NICE)
            except OSError:
                pass
        eng: Any = None
        try:
            from lbi_gui import engine as engine_bridge

            eng = engine_bridge.load_full_engine()
            self.steps.append("engine")
        except BaseException:
            pass
        finally:
            self.engine_ready.set()
        try:
            if eng is not None and self.request is not None and not self._skip.is_set():
                self._warm_problem(eng)
        except BaseException:
            pass
        finally:
            self.prepared.set()
            self.done.set()

    def _warm_problem(self, eng: Any) -> None:
        from lbi_gui.engine.run_driver import RunDriver

        request = dict(self.request or {})
        eng.set_threads(max(1, int(request.get("threads") or 1)))
        driver = RunDriver(lambda *_args: None)
        driver._eng = eng
        try:
            prepared = driver._prepare(request)  # caches the loaded network for the real jobs
            self.steps.append("prepare")
        finally:
            self.prepared.set()
        if self._skip.is_set():
            return
        gen = eng.iterate(prepared)
        try:
            next(gen)  # the first iteration's one-time work; the record is thrown away
            self.steps.append("iterate")
        finally:
            gen.close()

    def note_job(self, request: dict[str, Any] | None, run: bool = False) -> None:
        """A real job arrived: skip the rest of the warm-up unless it is for the same network
        (its work would be wasted and only delay the job). A run skips the throw-away
        iteration in any case: the run does that work itself, at normal priority, with its
        curve live from the first iteration (waiting behind the low-priority warm-up showed
        nothing for seconds on a busy machine, then the whole run at once)."""
        if run:
            self._skip.set()
        if request is None or self.request is None:
            return
        if any(request.get(k) != self.request.get(k)
               for k in ("network", "input_shape", "device", "dtype")):
            self._skip.set()

    def wait_prepared(self) -> None:
        self.engine_ready.wait()
        self.prepared.wait()

    def wait_engine(self) -> None:
        self.engine_ready.wait()

    def wait_done(self) -> None:
        self.done.wait()
