"""Bookkeeping shared by every method: per-sample stopping, timing, records.

Methods own the mathematics; this room owns *when* to stop and *what* to report, so that
all methods stop, cancel and report identically.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from lbi_engine.protocols import Problem
from lbi_engine.solvers.base import (
    CancelToken,
    IterateRecord,
    StopReason,
    StopRule,
    Stopwatch,
    WarmStart,
    all_finite,
)
from lbi_engine.solvers.choice import AlphaChoice

# An objective this many times larger than the first one reported counts as a blow-up.
BLOW_UP_FACTOR = 1e8
# SSIM runs per sample on the CPU (scikit-image); live (before the final record) only for
# small batches, and at most once per SSIM_LIVE_SPAN iterations: one SSIM of a 28x28 image
# costs ~0.7 ms, more than three joint steps, and the search of alpha "auto" reports every 5
# iterations (SSIM on every record was a quarter of a default run's wall time).
SSIM_LIVE_MAX_BATCH = 4
SSIM_LIVE_SPAN = 50
# The objective rule looks at no run shorter than this many iterations: the first steps
# from x_0 = 0 can be slow to move the objective for reasons that say nothing about
# convergence (e.g. a tiny first step of a backtracking method).
OBJECTIVE_MIN_RUN = 20
# The objective rule reads the objective of the records: with it on, records come at least
# this often (a larger report_every is lowered to it), so a run never overshoots its stop by
# more than this many iterations. (A record costs about one forward pass.)
OBJECTIVE_CHECK_MAX = 50


class RunMonitor:
    """Tracks which samples are still running and builds the records."""

    def __init__(
        self,
        problem: Problem,
        method: str,
        stop: StopRule,
        cancel: CancelToken | None,
        report_every: int,
        start_iteration: int = 0,
    ) -> None:
        self.problem = problem
        self.method = method
        self.stop = stop
        self.cancel = cancel
        self.report_every = max(1, int(report_every))
        if stop.tol_mode == "objective" and stop.tol > 0:
            self.report_every = min(self.report_every, OBJECTIVE_CHECK_MAX)
        self.iteration = int(start_iteration)
        self.start_iteration = int(start_iteration)
        batch = problem.batch
        self.active = torch.ones(batch, dtype=torch.bool, device=problem.device)
        self._all_active = True  # cache of active.all(): checked every iteration
        self._resume = False  # a record was handed out; restart the watch on the next step
        self.reasons: list[str | None] = [None] * batch
        self.watch = Stopwatch()
        self.first_objective: Tensor | None = None
        self.stage = ""
        self.extras: dict[str, Any] = {}
        #: the method's state for a warm start, set before each record (copied into it)
        self.warm: WarmStart | None = None
        #: the alpha a stage chose (layer-wise), carried by every record from then on
        self.choice: AlphaChoice | None = None
        # The problem's dtype, so that every record's residuals share one dtype.
        device, dtype = problem.device, problem.dtype
        self._last_dx = torch.full((batch,), math.inf, device=device, dtype=dtype)
        self._last_dz = torch.full((batch,), math.inf, device=device, dtype=dtype)
        self._pending_change: Callable[[], tuple[Tensor, Tensor | None]] | None = None
        # (iteration, objective) of the reports of this stage, for the objective rule
        self._history: list[tuple[int, Tensor]] = []
        self._history_start = self.start_iteration
        self._last_ssim: int | None = None  # the iteration of the last live SSIM

    def subset(self, problem: Problem, keep: Tensor) -> RunMonitor:
        """A monitor of the samples ``keep`` (row indices of this batch) on ``problem`` (the
        problem of those rows): the same count, stop rule, clock and extras, and those
        samples' active flags, stop reasons, last changes and objective history, so that each
        sample stops exactly as it would have in the whole batch."""
        self._settle_change()
        other = RunMonitor(problem, self.method, self.stop, self.cancel, self.report_every,
                           self.start_iteration)
        rows = keep.tolist()
        other.report_every = self.report_every
        other.iteration = self.iteration
        other.active = self.active[keep].clone()
        other._all_active = bool(other.active.all())
        other._resume = self._resume
        other.reasons = [self.reasons[i] for i in rows]
        other.watch = self.watch
        if self.first_objective is not None:
            other.first_objective = self.first_objective[keep]
        other.stage = self.stage
        other.extras = dict(self.extras)
        other.warm = self.warm
        other.choice = self.choice
        other._last_dx, other._last_dz = self._last_dx[keep], self._last_dz[keep]
        other._history = [(k, v[keep]) for k, v in self._history]
        other._history_start = self._history_start
        other._last_ssim = self._last_ssim
        return other

    # -- stopping ----------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._all_active or bool(self.active.any())

    @property
    def all_active(self) -> bool:
        """No sample has stopped (cached: finish() is the only way to stop a sample; code that
        reactivates samples by writing ``active`` only makes the cache re-check)."""
        if not self._all_active:
            self._all_active = bool(self.active.all())
        return self._all_active

    def finish(self, mask: Tensor, reason: StopReason) -> None:
        mask = mask & self.active
        if not bool(mask.any()):
            return
        self._all_active = False
        for index in torch.nonzero(mask).flatten().tolist():
            if self.reasons[index] is None:
                self.reasons[index] = reason.value
        self.active &= ~mask

    def before_iteration(self) -> bool:
        """Cancel, time budget and iteration cap; returns whether to iterate again."""
        if self._resume:  # the caller is back from a record: solver time runs again
            self._resume = False
            if getattr(self.watch, "_start", None) is None:
                self.watch.start()
        if self.cancel is not None and self.cancel.cancelled:
            self.finish(self.active.clone(), StopReason.CANCELLED)
        elif self.stop.time_budget is not None and self.watch.elapsed >= self.stop.time_budget:
            self.finish(self.active.clone(), StopReason.TIME_BUDGET)
        elif self.iteration - self.start_iteration >= self.stop.max_iter:
            self.finish(self.active.clone(), StopReason.MAX_ITERATIONS)
        return self.running

    def converged(self, dx: Tensor, dz: Tensor | None = None) -> None:
        """Stops samples whose changes (as StopRule.tol_mode measures them) are below tol.

        In ``"objective"`` mode the changes are only kept for the records: the objective rule
        runs on the reported objectives (:meth:`objective_settled`, called by :meth:`record`).
        """
        self.note_change(dx, dz)
        if self.stop.tol_mode == "objective":
            return
        if self.stop.tol <= 0 or self.iteration - self.start_iteration < self.stop.min_iter:
            return
        worst = dx if dz is None else torch.maximum(dx, dz)
        # one scalar decides the common case (nobody converged) without building a mask
        if self._all_active and not float(worst.min()) < self.stop.tol:
            return
        self.finish(worst < self.stop.tol, StopReason.TOLERANCE)

    def note_change(self, dx: Tensor, dz: Tensor | None = None) -> None:
        """The changes the next record reports (converged() notes every iteration's; a
        method that measures them only for its records notes them there)."""
        self._pending_change = None
        self._last_dx = dx
        if dz is not None:
            self._last_dz = dz

    def changes_read_at_records(self) -> bool:
        """Whether this iteration's changes are read by nothing but the records: the objective
        rule, with every sample running (else stopped samples' changes are zeroed as they
        stop). A method may then note them with :meth:`note_change_later`."""
        return self.stop.tol_mode == "objective" and self._all_active

    def note_change_later(self, changes: Callable[[], tuple[Tensor, Tensor | None]]) -> None:
        """As :meth:`note_change` with what ``changes()`` returns, called only if a record
        (or :meth:`subset`) comes before the next change is noted; ``changes`` must give the
        numbers of this iteration until then."""
        self._pending_change = changes

    def _settle_change(self) -> None:
        if self._pending_change is not None:
            self.note_change(*self._pending_change())

    def guard_finite(self, new: list[Tensor], old: list[Tensor]) -> list[Tensor]:
        """Stops samples with non-finite values, keeping their last finite iterate."""
        finite = all_finite(*new)
        if bool(finite.all()):
            return new
        self.finish(~finite, StopReason.DIVERGED)
        kept = []
        for n, o in zip(new, old, strict=True):
            view = (~finite).reshape(-1, *([1] * (n.dim() - 1)))
            kept.append(torch.where(view, o, n))
        return kept

    def accept(self, new: Tensor, old: Tensor) -> tuple[Tensor, Tensor]:
        """guard_finite + freeze + relative_change for one variable, from two norms.

        ||new - old|| and ||new|| are finite iff new is (old is): one scalar decides the
        common case, instead of a per-element isfinite pass. Returns (new, change).
        """
        batch = new.shape[0]
        diff = torch.linalg.vector_norm((new - old).reshape(batch, -1), dim=1)
        size = torch.linalg.vector_norm(new.reshape(batch, -1), dim=1)
        if not math.isfinite(float(diff.sum() + size.sum())):
            finite = torch.isfinite(diff) & torch.isfinite(size)
            self.finish(~finite, StopReason.DIVERGED)
        change = diff if self.stop.tol_mode == "absolute" else diff / size.clamp_min(1e-12)
        if not self.all_active:
            new = self.freeze(new, old)
            change = torch.where(self.active, change, torch.zeros_like(change))
        return new, change

    def freeze(self, new: Tensor, old: Tensor) -> Tensor:
        """Samples that stopped keep their value while the others go on."""
        if self.all_active:
            return new
        view = self.active.reshape(-1, *([1] * (new.dim() - 1)))
        return torch.where(view, new, old)

    def objective_settled(self, objective: Tensor) -> None:
        """The objective rule (StopRule, ``tol_mode="objective"``) on a reported objective.

        Stops a sample when max_j |E_j - E_k| <= tol |E_k| over the reports j since the last
        report at or before the middle of the run (k0 + (k - k0)/2). Solvers need not call
        this: :meth:`record` does for every report of a running stage.
        """
        stop = self.stop
        if stop.tol_mode != "objective" or stop.tol <= 0:
            return
        if self._history_start != self.start_iteration:  # a new stage (layer-wise) or run
            self._history, self._history_start = [], self.start_iteration
        k = self.iteration
        if self._history and self._history[-1][0] == k:
            return  # the same iterate reported twice (e.g. the final record)
        value = objective.detach().clone()
        self._history.append((k, value))
        run = k - self.start_iteration
        if run < max(stop.min_iter, OBJECTIVE_MIN_RUN):
            return
        middle = self.start_iteration + run // 2
        first = 0  # the last report at or before the middle opens the window
        for index, (iteration, _) in enumerate(self._history):
            if iteration <= middle:
                first = index
        del self._history[:first]
        if len(self._history) < 2:
            return
        window = torch.stack([v for _, v in self._history])  # (reports, B)
        spread = (window - value).abs().amax(dim=0)
        settled = torch.isfinite(spread) & (spread <= stop.tol * value.abs().clamp_min(1e-30))
        if bool(settled.any()):
            self.finish(settled, StopReason.TOLERANCE)

    # -- reporting ---------------------------------------------------------------------------
    def _live_ssim_due(self) -> bool:
        """SSIM on a record before the final one: small batches, the first record of a run
        and then at most once per SSIM_LIVE_SPAN iterations (counted over warm starts)."""
        if self.problem.batch > SSIM_LIVE_MAX_BATCH:
            return False
        return self._last_ssim is None or self.iteration - self._last_ssim >= SSIM_LIVE_SPAN

    def due(self) -> bool:
        return (self.iteration - self.start_iteration) % self.report_every == 0

    def record(
        self,
        x: Tensor,
        aux: list[Tensor],
        *,
        final: bool = False,
        parts: dict[str, Tensor] | None = None,
    ) -> IterateRecord:
        """Builds a record (the time spent here is not counted as solver time)."""
        self.watch.pause()
        self._settle_change()
        problem = self.problem
        with torch.no_grad():
            if parts is None:
                parts = problem.objective_parts(x, aux if aux else None)
            objective = parts["total"]
            if not final:
                self.objective_settled(objective)
            if self.first_objective is None:
                self.first_objective = objective.detach().clone()
            else:
                blown = ~torch.isfinite(objective) | (
                    objective.abs() > BLOW_UP_FACTOR * self.first_objective.abs().clamp_min(1.0)
                )
                self.finish(blown, StopReason.DIVERGED)
            psnr = ssim = None
            if problem.x_true is not None:
                from lbi_engine import metrics

                psnr = metrics.psnr(x, problem.x_true, data_range=problem.data_range)
                if final or self._live_ssim_due():
                    ssim = problem_ssim(problem, x)
                    self._last_ssim = self.iteration
        if final:
            self.finish(self.active.clone(), StopReason.FINISHED)
        rec = IterateRecord(
            method=self.method,
            iteration=self.iteration,
            # copies: solvers update their state in place (PrimalDualBlock reuses two slots)
            x=x.detach().clone(),
            aux=[a.detach().clone() for a in aux],
            objective=objective.detach(),
            bregman_terms=parts["bregman"].detach(),
            reg_term=parts["reg"].detach(),
            discrepancy=parts["discrepancy"].detach(),
            primal_residual=self._last_dx.detach().clone(),
            dual_residual=self._last_dz.detach().clone(),
            elapsed=self.watch.elapsed,
            active=self.active.clone(),
            psnr=psnr,
            ssim=ssim,
            final=final,
            stop_reasons=[r or StopReason.FINISHED.value for r in self.reasons] if final else None,
            stage=self.stage,
            extras={k: v.detach().clone() if isinstance(v, Tensor) else v
                    for k, v in self.extras.items()},
            warm=None if self.warm is None else self.warm.copy(),
            choice=self.choice,
        )
        if not final:
            # restarted by the next before_iteration(), i.e. once the caller has the record
            # and asks for more: the caller's time between records is not solver time
            self._resume = True
        return rec


def problem_ssim(problem: Problem, x: Tensor) -> Tensor | None:
    from lbi_engine import metrics

    shape, x_true = problem.image_shape, problem.x_true
    if shape is None or x_true is None:
        return None
    import numpy as np

    batch = x.shape[0]
    offset = problem.display_offset
    # A diverged sample keeps its last finite iterate, which can be ~1e300: its SSIM is
    # NaN, and squaring it inside scikit-image must not flood the log with overflow warnings.
    with np.errstate(over="ignore", invalid="ignore"):
        return metrics.ssim(
            x.reshape(batch, *shape) + offset,
            x_true.reshape(batch, *shape) + offset,
            data_range=problem.data_range,
        )
