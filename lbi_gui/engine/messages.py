"""Typed messages between the window and its solver: one frozen dataclass per kind.

Why typed: the pipe to the engine child used to carry positional tuples
(``("prepare", ch, job_id, request)``), so a reader had to know each kind's field order and a
misspelt kind failed silently. Here every kind is a class with named fields, every receiver
routes with one :class:`Dispatcher` keyed by class, and an unknown message fails loudly with
:class:`UnknownMessageError`.

Everything here pickles (it crosses a process boundary) and imports neither Qt nor torch:
payloads are numpy arrays and plain values. The payload records (:class:`RunJob`,
:class:`PreparedInfo`, :class:`Progress`, :class:`RunOutcome`, :class:`ErrorInfo`) live here
too; :mod:`lbi_gui.engine.run_driver` re-exports them under their old import path.

Three families:

* window → engine jobs (queued per channel): :class:`Boot`, :class:`Prepare`, :class:`Run`;
  control (applied at once): :class:`Pause`, :class:`Resume`, :class:`Stop`,
  :class:`Restart`; channel and process life: :class:`Close`, :class:`Exit`, :class:`Ping`.
* engine → window events (what a :class:`~lbi_gui.engine.run_driver.RunDriver` emits):
  :class:`Booted`, :class:`Prepared`, :class:`ProgressReport`, :class:`RunDone`,
  :class:`Failed` (:data:`EVENTS`). Their ``ch`` is 0 in the driver; the child stamps its
  channel on before sending.
* process bookkeeping: :class:`Hello`, :class:`Pong`, :class:`Closed` (child → host) and
  :class:`Died` (the host's reader thread saw the pipe end).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lbi_engine.errors import LbiError, UnsafeFileError
from lbi_engine.results.run_metrics import RunMetrics

# ---- payload records ------------------------------------------------------------------------


@dataclass
class ErrorInfo:
    """An exception made safe to hand across threads and processes and to show in a dialog."""

    kind: str  # "boot" | "prepare" | "run"
    exc_type: str
    message: str
    detail: str
    is_user_error: bool  # an LbiError: the message says what to do
    unsafe: bool  # UnsafeFileError: the window may ask for consent and retry
    request: dict[str, Any] | None = None

    @classmethod
    def from_exc(cls, kind: str, exc: BaseException, request: dict | None = None) -> ErrorInfo:
        return cls(kind=kind, exc_type=type(exc).__name__, message=str(exc) or repr(exc),
                   detail="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
                   is_user_error=isinstance(exc, LbiError),
                   unsafe=isinstance(exc, UnsafeFileError), request=request)


@dataclass
class PreparedInfo:
    """What the window shows about a prepared problem (numpy and plain values only)."""

    request: dict[str, Any]
    network_name: str
    card: dict[str, Any]
    layers: list[dict[str, Any]]
    truth: np.ndarray | None
    decoder: np.ndarray | None
    decoder_psnr: float | None
    delta: float | None
    delta_squared: float | None
    noise_norm: float | None
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    preprocessing: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # what the engine warned about
    sha256: str | None = None  # of the network file (result.json)
    has_decoder: bool = False


@dataclass
class Progress:
    """A throttled batch: all curve points since the last batch and the newest images."""

    run_id: int
    points: list[dict[str, Any]]
    iteration: int
    stage: str
    x_display: np.ndarray | None
    aux_display: list[np.ndarray]
    restarts: list[tuple[int, str]] = field(default_factory=list)
    prepared: PreparedInfo | None = None


@dataclass
class RunOutcome:
    """The end of a run (any cause). ``user_action`` is "stop", "finish" or None."""

    run_id: int
    request: dict[str, Any]
    stop_reason: str
    iterations: int
    elapsed: float
    metrics: RunMetrics
    x_raw: np.ndarray
    x_display: np.ndarray
    aux_display: list[np.ndarray]
    user_action: str | None
    #: (first iteration, request) of each segment: the settings the run had from there on
    #: (one entry without warm restarts).
    segments: list[tuple[int, dict[str, Any]]] = field(default_factory=list)


@dataclass(frozen=True)
class RunJob:
    """A run to start: its id (the window's numbering), request, and whether it starts paused."""

    run_id: int
    request: dict[str, Any]
    start_paused: bool = False


# ---- window -> engine -----------------------------------------------------------------------


@dataclass(frozen=True)
class Boot:
    """Import the engine and report what it offers (answer: :class:`Booted`)."""

    ch: int


@dataclass(frozen=True)
class Prepare:
    """Prepare ``request`` for display (answer: :class:`Prepared` or :class:`Failed`)."""

    ch: int
    job_id: int
    request: dict[str, Any]


@dataclass(frozen=True)
class Run:
    """Run ``job`` (answers: :class:`ProgressReport` batches, then :class:`RunDone`)."""

    ch: int
    job: RunJob


@dataclass(frozen=True)
class Pause:
    ch: int


@dataclass(frozen=True)
class Resume:
    ch: int


@dataclass(frozen=True)
class Stop:
    """End run ``run_id``: action "stop" (discard) or "finish" (keep the iterate)."""

    ch: int
    action: str
    run_id: int | None


@dataclass(frozen=True)
class Restart:
    """Restart the running solve warm with ``request``."""

    ch: int
    request: dict[str, Any]


@dataclass(frozen=True)
class Close:
    """End the channel's job and thread (answer: :class:`Closed`)."""

    ch: int


@dataclass(frozen=True)
class Exit:
    """End the engine child."""


@dataclass(frozen=True)
class Ping:
    """Heartbeat; the child's listener answers :class:`Pong` with the same ``seq`` at once."""

    seq: int


#: Messages that queue behind the channel's running job; the others act at once.
JOBS = (Boot, Prepare, Run)
#: Control messages a running job must see while it runs.
CONTROLS = (Pause, Resume, Stop, Restart)

# ---- engine -> window -----------------------------------------------------------------------


@dataclass(frozen=True)
class Booted:
    """The engine loaded; ``info`` = {"zoo": [...], "datasets": [...], "cuda": bool}."""

    info: dict[str, Any]
    ch: int = 0


@dataclass(frozen=True)
class Prepared:
    """A problem is ready; ``job_id`` -1 marks the problem a run prepared for itself."""

    job_id: int
    info: PreparedInfo
    ch: int = 0


@dataclass(frozen=True)
class ProgressReport:
    """A throttled batch of a running solve."""

    progress: Progress
    ch: int = 0


@dataclass(frozen=True)
class RunDone:
    """A run ended (any cause)."""

    outcome: RunOutcome
    ch: int = 0


@dataclass(frozen=True)
class Failed:
    """Job ``job_id`` failed (boot: 0; prepare: its job id; run: its run id)."""

    job_id: int
    error: ErrorInfo
    ch: int = 0


#: What a :class:`~lbi_gui.engine.run_driver.RunDriver` emits.
EVENTS = (Booted, Prepared, ProgressReport, RunDone, Failed)
Event = Booted | Prepared | ProgressReport | RunDone | Failed

# ---- process bookkeeping --------------------------------------------------------------------


@dataclass(frozen=True)
class Hello:
    """The child's first message: its pid and the Qt modules it imported (none, by contract)."""

    pid: int
    qt_modules: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pong:
    seq: int


@dataclass(frozen=True)
class Closed:
    """The channel's job thread ended."""

    ch: int


@dataclass(frozen=True)
class Died:
    """(Host-internal) the reader thread saw the pipe end: the child is gone."""


# ---- routing --------------------------------------------------------------------------------


class UnknownMessageError(TypeError):
    """A message no handler was registered for (a programming error, never user input)."""


class Dispatcher:
    """Routes a message to the handler registered for its exact class.

    One table per receiver: adding a message kind without teaching a receiver fails at the
    first send with a message naming the class and the receiver, not silently.
    """

    def __init__(self, name: str, handlers: Mapping[type, Callable[[Any], Any]]) -> None:
        self.name = name
        self._handlers = dict(handlers)

    def handles(self, msg: object) -> bool:
        return type(msg) in self._handlers

    def __call__(self, msg: object) -> Any:
        handler = self._handlers.get(type(msg))
        if handler is None:
            known = ", ".join(sorted(t.__name__ for t in self._handlers))
            raise UnknownMessageError(
                f"{self.name} got an unknown engine message {type(msg).__name__} ({msg!r:.120}); "
                f"it handles: {known}")
        return handler(msg)
