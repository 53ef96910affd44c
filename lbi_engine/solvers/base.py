"""The one protocol every inversion method speaks.

A solver is a generator of :class:`IterateRecord` objects. Callers (CLI, GUI worker,
scripts, tests) pull records and never special-case a method. Records come every
``report_every`` iterations and always at the end; the final record has ``final=True``
and a ``stop_reason`` for every sample of the batch.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import torch
from torch import Tensor

# torch-free, so that run records validate before torch loads; re-exported here for solvers
from lbi_engine.settings.solver import TOL_MEANING, TOL_MODES, StopRule  # noqa: F401
from lbi_engine.solvers.choice import AlphaChoice, RunPosition


class StopReason(str, Enum):
    """Why a sample (or a whole run) stopped."""

    TOLERANCE = "tolerance"
    MAX_ITERATIONS = "max_iterations"
    DISCREPANCY = "discrepancy"
    TIME_BUDGET = "time_budget"
    CANCELLED = "cancelled"
    DIVERGED = "diverged"
    FINISHED = "finished"  # a method with a fixed schedule (e.g. layer-wise stages) ran to its end


class CancelToken:
    """Cooperative cancel: the solver checks it before every iteration."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        """Ask the run to stop; safe from any thread. It ends with stop reason ``cancelled``."""
        self._event.set()

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._event.is_set()


@dataclass
class WarmStart:
    """What a run needs beyond its iterates to continue exactly where a record left off.

    ``dual``: the TV prox's (or the primal–dual block's) dual variable; ``x_prev`` and
    ``momentum``: an accelerated method's previous iterate (flattened and concatenated over
    the blocks) and its momentum ``[t; coefficient]`` per sample (``operators.momentum``).
    None where the method has no such state."""

    dual: Tensor | None = None
    x_prev: Tensor | None = None
    momentum: Tensor | None = None

    def copy(self) -> WarmStart:
        """Detached copies of the tensors (a record keeps its own: solvers update theirs in
        place)."""
        def kept(t: Tensor | None) -> Tensor | None:
            return None if t is None else t.detach().clone()

        return WarmStart(kept(self.dual), kept(self.x_prev), kept(self.momentum))


@dataclass
class IterateRecord:
    """One report of a running solver, for a batch of B samples.

    Tensors are detached and live on the solver's device; call :meth:`to_numpy` before
    handing a record to another thread that must not see later in-place updates.
    """

    method: str
    iteration: int
    x: Tensor  # (B, *input_shape) current input estimate x_0
    aux: list[Tensor]  # auxiliary variables x_1 .. x_{L-1} (empty for one layer)
    objective: Tensor  # (B,) full objective of the paper's problem (B_Psi >= 0 incl. constants)
    bregman_terms: Tensor  # (B, L) each layer's Bregman term
    reg_term: Tensor  # (B,) alpha * R(x)
    discrepancy: Tensor  # (B,) ||sigma(f(x)) - y_delta||
    primal_residual: Tensor  # (B,) relative change of x (or optimality residual, see method)
    dual_residual: Tensor  # (B,) relative change of the dual / auxiliary variables
    elapsed: float  # seconds spent in the solver so far
    active: Tensor  # (B,) bool, samples still iterating
    psnr: Tensor | None = None  # (B,) when the ground truth is known
    # SSIM: on the final record; before it for batches of at most 4, on the run's first
    # record and then at most once per 50 iterations (``_monitor.SSIM_LIVE_SPAN``)
    ssim: Tensor | None = None
    final: bool = False
    stop_reasons: list[str] | None = None  # per sample, on the final record
    stage: str = ""  # e.g. "layer 3/3" for layer-wise inversion
    # a method's own notes (step sizes, restarts, layer-wise stages, warnings), by name
    extras: dict[str, Any] = field(default_factory=dict)
    # the alpha the run chose and how: on an alpha "auto" run's final record, on the
    # layer-wise method's records from its input stage on; None elsewhere
    choice: AlphaChoice | None = None
    # the stage of an alpha "auto" run this record belongs to; None outside such a run
    position: RunPosition | None = None
    # what a run needs to continue this one exactly (``solvers.warm_start``)
    warm: WarmStart | None = None
    # the joint method's weight on the hidden Bregman terms (MATH.md §5.7); None elsewhere
    hidden_weight: float | None = None

    @property
    def stop_reason(self) -> str | None:
        """The run's reason: the one shared by all samples, else the first non-trivial one."""
        if not self.stop_reasons:
            return None
        unique = set(self.stop_reasons)
        if len(unique) == 1:
            return self.stop_reasons[0]
        for reason in (StopReason.DIVERGED, StopReason.CANCELLED, StopReason.TIME_BUDGET):
            if reason.value in unique:
                return reason.value
        return self.stop_reasons[0]

    def to_numpy(self) -> dict[str, Any]:
        """A thread-safe copy with numpy arrays (for the GUI and for files)."""

        def cpu(t: Tensor | None) -> Any:
            return None if t is None else t.detach().to("cpu", copy=True).numpy()

        return {
            "method": self.method,
            "iteration": self.iteration,
            "x": cpu(self.x),
            "aux": [cpu(a) for a in self.aux],
            "objective": cpu(self.objective),
            "bregman_terms": cpu(self.bregman_terms),
            "reg_term": cpu(self.reg_term),
            "discrepancy": cpu(self.discrepancy),
            "primal_residual": cpu(self.primal_residual),
            "dual_residual": cpu(self.dual_residual),
            "elapsed": self.elapsed,
            "active": cpu(self.active),
            "psnr": cpu(self.psnr),
            "ssim": cpu(self.ssim),
            "final": self.final,
            "stop_reasons": list(self.stop_reasons) if self.stop_reasons else None,
            "stop_reason": self.stop_reason,
            "stage": self.stage,
            "extras": {
                key: cpu(value) if isinstance(value, Tensor) else value
                for key, value in self.extras.items()
            },
            "warm": None if self.warm is None else {
                "dual": cpu(self.warm.dual), "x_prev": cpu(self.warm.x_prev),
                "momentum": cpu(self.warm.momentum)},
            "hidden_weight": self.hidden_weight,
            "choice": copy.deepcopy(self.choice),
            "position": self.position,
        }


class Stopwatch:
    """Solver time, excluding the time the caller spends between records."""

    def __init__(self) -> None:
        self.total = 0.0
        self._start: float | None = None

    def start(self) -> None:
        self._start = time.perf_counter()

    def pause(self) -> None:
        if self._start is not None:
            self.total += time.perf_counter() - self._start
            self._start = None

    @property
    def elapsed(self) -> float:
        running = 0.0 if self._start is None else time.perf_counter() - self._start
        return self.total + running


def relative_change(new: Tensor, old: Tensor, mode: str = "relative") -> Tensor:
    """Per-sample ‖new − old‖ (absolute) or ‖new − old‖ / max(‖new‖, 1e-12) (otherwise)."""
    batch = new.shape[0]
    diff = (new - old).reshape(batch, -1).norm(dim=1)
    if mode == "absolute":
        return diff
    return diff / new.reshape(batch, -1).norm(dim=1).clamp_min(1e-12)


def all_finite(*tensors: Tensor) -> Tensor:
    """Per-sample flag: every entry of every tensor is finite."""
    flags = None
    for t in tensors:
        f = torch.isfinite(t.reshape(t.shape[0], -1)).all(dim=1)
        flags = f if flags is None else flags & f
    assert flags is not None
    return flags


def final(records: Iterator[IterateRecord]) -> IterateRecord:
    """Consumes a run and returns its final record."""
    last = None
    for record in records:
        last = record
    assert last is not None and last.final
    return last
