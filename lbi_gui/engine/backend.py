"""What the window needs from a solver backend, and from the engine a backend drives.

Why Protocols: the window (:class:`~lbi_gui.window.controller.RunController`) must not care whether
its solver runs in a thread of the GUI process (:class:`lbi_gui.engine.worker.ThreadBackend`)
or in the engine child process (:class:`lbi_gui.engine.process.ProcessBackend`); it talks to
:class:`EngineBackend` only. The backends are QObjects, whose metaclass cannot be mixed with
``Protocol``'s, so they implement it structurally; the ``TYPE_CHECKING`` assignments at the
end of their modules make the type checker confirm it, and a test checks it at run time.

:class:`EngineApi` is the other seam: the namespace a
:class:`~lbi_gui.engine.run_driver.RunDriver` drives (:func:`lbi_gui.engine.load_full_engine`:
the real one, with torch; tests substitute a numpy fake). This module imports neither Qt nor
torch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol, runtime_checkable

from lbi_engine.results.run_metrics import RunMetrics
from lbi_gui.engine import messages as m


@runtime_checkable
class EngineBackend(Protocol):
    """One window's solver. Jobs return at once; answers arrive as (Qt) signals in the GUI
    thread: ``booted(info)``, ``prepared(job_id, PreparedInfo)``, ``progress(Progress)``,
    ``run_done(RunOutcome)``, ``failed(job_id, ErrorInfo)``. Control methods are safe to call
    while a job runs."""

    name: str  # "thread" | "process"
    booted: Any
    prepared: Any
    progress: Any
    run_done: Any
    failed: Any

    @property
    def thread(self) -> Any:
        """The solver's QThread, or a stand-in with ``wait``/``isFinished``/``isRunning``."""

    # jobs (queued behind the running one)
    def boot(self) -> None: ...

    def prepare(self, job_id: int, request: dict[str, Any]) -> None: ...

    def run(self, job: m.RunJob) -> None: ...

    # control (applied at once)
    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def request_stop(self, action: str = "stop") -> None:
        """End the current run: "stop" (discard) or "finish" (keep this iterate)."""

    def request_restart(self, request: dict[str, Any]) -> bool:
        """Restart the running solve warm with ``request``; False when no run is going."""

    def shutdown(self, timeout_ms: int = 10000) -> bool:
        """End the current job and wait for it (at most ``timeout_ms``); True if it ended."""


@runtime_checkable
class EngineApi(Protocol):
    """The engine namespace a run driver uses (see :func:`lbi_gui.engine._real_engine`)."""

    InversionRequest: Any  # .from_dict(record) -> request with .to_dict()
    FORMAT_VERSION: int
    CancelToken: Callable[[], Any]  # .cancel(), .cancelled

    def prepare(self, request: Any, bundle: Any = None) -> Any: ...

    def iterate(self, prepared: Any, *, cancel: Any = None,
                warm_start_from: dict[str, Any] | None = None) -> Iterator[Any]: ...

    def final_metrics(self, prepared: Any, record: Any) -> RunMetrics: ...

    def list_zoo(self) -> list[str]: ...

    def list_datasets(self) -> list[str]: ...

    def list_splits(self, dataset: str) -> list[str]: ...

    def dataset_size(self, dataset: str, split: str) -> int | None: ...

    def get_sample(self, dataset: str, split: str, index: int) -> Any: ...

    def cuda_available(self) -> bool: ...

    def set_threads(self, n: int) -> None: ...


def signal_dispatcher(target: Any, name: str) -> m.Dispatcher:
    """A dispatcher turning engine events into ``target``'s signals of the same meaning.

    Both backends use it (the thread backend in its solver thread, the process backend in the
    GUI thread), so the signal signatures of :class:`EngineBackend` are stated once.
    """
    return m.Dispatcher(name, {
        m.Booted: lambda e: target.booted.emit(e.info),
        m.Prepared: lambda e: target.prepared.emit(e.job_id, e.info),
        m.ProgressReport: lambda e: target.progress.emit(e.progress),
        m.RunDone: lambda e: target.run_done.emit(e.outcome),
        m.Failed: lambda e: target.failed.emit(e.job_id, e.error),
    })
