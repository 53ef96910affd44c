"""A batch whose samples leave it when they stop: each sample costs its own iterations.

A batch run (``solve``) steps every sample until the last one stops; those that stopped
earlier are frozen but still computed, so a batch of B samples costs B times its slowest
sample. Here, at every record where samples stop (the objective rule decides at records),
their final state is kept and the method goes on with the other rows only (the joint
method's accelerated step: its state, momentum included, and the monitor's per-sample
history are carried over row by row, so every sample takes the steps, and stops at the
iteration, it takes in the whole batch; within rounding, those of a run of its own).

The final record holds every sample as it stopped: ``iteration`` is the last one run, and
``extras["stop_iterations"]`` each sample's own. Methods other than the accelerated joint
step run as one batch (``solve``), with the batch's iteration count for every sample.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor

from lbi_engine.protocols import Problem
from lbi_engine.settings.solver import SolverOptions
from lbi_engine.solvers.base import IterateRecord, StopRule, WarmStart, final


def solve_shrinking(problem: Problem, method: str, *, stop: StopRule,
                    options: SolverOptions | dict[str, Any] | None = None,
                    report_every: int = 10) -> IterateRecord:
    """The final record of ``method`` on the batch ``problem`` from a cold start, every
    sample stopped by its own rule (see the module docstring)."""
    from lbi_engine.solvers import resolve_method, solve
    from lbi_engine.solvers.joint import fista as accel
    from lbi_engine.solvers.joint.hidden_weight import run_weighted

    if not isinstance(options, SolverOptions):
        options = SolverOptions.from_dict(options)
    opts = options
    if resolve_method(method, problem) != "joint" or not accel.supported(problem, opts) \
            or problem.batch == 1:
        record = final(solve(problem, method, stop=stop, options=opts,
                             report_every=report_every))
        record.extras["stop_iterations"] = [int(record.iteration)] * problem.batch
        return record
    return final(run_weighted(problem, opts, None, lambda p, _init: iter(
        [_ShrinkingJoint(p, stop, opts, report_every).run()])))


def solve_shrinking_split(problem: Problem, method: str, parts: int, *, stop: StopRule,
                          options: SolverOptions | dict[str, Any] | None = None,
                          report_every: int = 10) -> IterateRecord:
    """:func:`solve_shrinking` on ``parts`` interleaved shares of the batch at once, one
    Python thread each (torch releases the GIL in its kernels), merged into one record.

    Why threads of whole solves rather than torch's own threads: the samples are
    independent, so the shares never wait for each other, where torch's threads meet at a
    barrier in every operation (on a loaded machine they spin there). The caller sets
    torch's thread count (one per share is meant)."""
    from concurrent.futures import ThreadPoolExecutor

    parts = max(1, min(int(parts), problem.batch))
    if parts == 1:
        return solve_shrinking(problem, method, stop=stop, options=options,
                               report_every=report_every)
    shares = [torch.arange(k, problem.batch, parts, device=problem.device)
              for k in range(parts)]
    with ThreadPoolExecutor(parts) as pool:
        records = list(pool.map(lambda rows: solve_shrinking(
            problem_rows(problem, rows), method, stop=stop, options=options,
            report_every=report_every), shares))
    return merge_rows(records, shares, problem.batch)


def merge_rows(records: list[IterateRecord], shares: list[Tensor], batch: int
               ) -> IterateRecord:
    """One final record of ``batch`` samples from the final records of the row shares."""
    def merged(pick: Any) -> Any:
        first = pick(records[0])
        if first is None:
            return None
        out = first.new_empty((batch, *first.shape[1:]))
        for record, rows in zip(records, shares, strict=True):
            out[rows] = pick(record)
        return out

    def listed(pick: Any) -> list[Any]:
        out: list[Any] = [None] * batch
        for record, rows in zip(records, shares, strict=True):
            for row, value in zip(rows.tolist(), pick(record), strict=True):
                out[row] = value
        return out

    first = records[0]
    extras = dict(first.extras)
    extras["stop_iterations"] = listed(lambda r: r.extras["stop_iterations"])
    return IterateRecord(
        method=first.method, iteration=max(r.iteration for r in records),
        x=merged(lambda r: r.x),
        aux=[merged(lambda r, i=i: r.aux[i]) for i in range(len(first.aux))],
        objective=merged(lambda r: r.objective), bregman_terms=merged(lambda r: r.bregman_terms),
        reg_term=merged(lambda r: r.reg_term), discrepancy=merged(lambda r: r.discrepancy),
        primal_residual=merged(lambda r: r.primal_residual),
        dual_residual=merged(lambda r: r.dual_residual),
        elapsed=max(r.elapsed for r in records), active=merged(lambda r: r.active),
        psnr=merged(lambda r: r.psnr), ssim=merged(lambda r: r.ssim), final=True,
        stop_reasons=listed(lambda r: r.stop_reasons), stage=first.stage, extras=extras,
        hidden_weight=first.hidden_weight)


def problem_rows(problem: Problem, keep: Tensor) -> Problem:
    """The problem of the samples ``keep`` (row indices): their codes, truths and noise
    levels; network, regulariser and weight shared."""
    def rows(t: Tensor | None) -> Tensor | None:
        return None if t is None else t[keep]

    return dataclasses.replace(problem, y_delta=problem.y_delta[keep],
                               x_true=rows(problem.x_true), delta=rows(problem.delta),
                               extras=dict(problem.extras))


class _ShrinkingJoint:
    """The accelerated joint method on a batch that sheds its stopped samples."""

    def __init__(self, problem: Problem, stop: StopRule, options: SolverOptions,
                 report_every: int) -> None:
        from lbi_engine.solvers._monitor import RunMonitor
        from lbi_engine.solvers.joint.method import AcceleratedJoint, accelerated_start

        self.problem, self.options = problem, options
        batch = problem.batch
        x0, aux = accelerated_start(problem)
        self.method = AcceleratedJoint(problem, x0, aux, options, stop.tol_mode)
        self.monitor = RunMonitor(problem, "joint", stop, None, report_every)
        self.monitor.extras.update(steps="accelerated", tau_x=self.method.fista.taus[0],
                                   tau_aux=self.method.fista.taus[1:], shrinking=True)
        self.rows = torch.arange(batch, device=problem.device)  # original index of each row
        like = problem.y_delta
        self.x = torch.empty_like(x0)
        self.aux = [torch.empty_like(a) for a in aux]
        self.objective = torch.empty(batch, dtype=like.dtype, device=like.device)
        self.reg = torch.empty_like(self.objective)
        self.discrepancy = torch.empty_like(self.objective)
        self.primal = torch.empty_like(self.objective)
        self.dual = torch.empty_like(self.objective)
        self.bregman = torch.empty((batch, problem.depth), dtype=like.dtype, device=like.device)
        self.psnr = torch.empty_like(self.objective) if problem.x_true is not None else None
        self.iterations = [0] * batch
        self.reasons: list[str] = ["finished"] * batch
        self.extras: dict[str, Any] = {}

    def run(self) -> IterateRecord:
        """Iterates (in the driver's order: ``driver.iterate``) until every sample stopped;
        returns the final record of the whole batch."""
        self._harvest(self.method.record(self.monitor))  # the start record, as drive's
        self.monitor.watch.start()
        with torch.no_grad():
            while True:
                monitor, method = self.monitor, self.method
                if not monitor.before_iteration():
                    break
                dx, dz = method.step(monitor)
                monitor.iteration += 1
                monitor.converged(dx, dz)
                if monitor.running and monitor.due():
                    self._harvest(method.record(monitor))
        self.monitor.watch.pause()
        if bool(self.rows.numel()):
            self._harvest(self.method.record(self.monitor, final=True))
        return self._final()

    def _harvest(self, record: IterateRecord) -> None:
        """Keeps the state of the samples that stopped at ``record`` and drops their rows."""
        stopped = ~record.active if not record.final else torch.ones_like(record.active)
        if not bool(stopped.any()):
            return
        here = torch.nonzero(stopped).flatten()
        where = self.rows[here]
        self.x[where] = record.x[here]
        for mine, theirs in zip(self.aux, record.aux, strict=True):
            mine[where] = theirs[here]
        for mine, theirs in ((self.objective, record.objective), (self.reg, record.reg_term),
                             (self.discrepancy, record.discrepancy),
                             (self.bregman, record.bregman_terms),
                             (self.primal, record.primal_residual),
                             (self.dual, record.dual_residual)):
            mine[where] = theirs[here]
        if self.psnr is not None and record.psnr is not None:
            self.psnr[where] = record.psnr[here]
        reasons = self.monitor.reasons
        for row, index in zip(here.tolist(), where.tolist(), strict=True):
            self.iterations[index] = int(record.iteration)
            self.reasons[index] = reasons[row] or "finished"
        self.extras = record.extras
        keep = torch.nonzero(~stopped).flatten()
        if keep.numel() and not record.final:
            self._keep(keep)
        else:
            self.rows = self.rows[keep]

    def _keep(self, keep: Tensor) -> None:
        """Goes on with the rows ``keep`` only: their problem, state and monitor."""
        from lbi_engine.solvers.joint.method import AcceleratedJoint

        fista = self.method.fista
        xs, warm = fista.xs, fista.warm_state()
        assert warm.x_prev is not None and warm.momentum is not None  # FISTA's, always there
        problem = problem_rows(self.monitor.problem, keep)
        rows = WarmStart(dual=fista.dual[keep], x_prev=warm.x_prev[keep],
                         momentum=warm.momentum[:, keep])
        self.method = AcceleratedJoint(problem, xs[0][keep], [a[keep] for a in xs[1:]],
                                       self.options, self.monitor.stop.tol_mode, rows)
        self.monitor = self.monitor.subset(problem, keep)
        self.rows = self.rows[keep]

    def _final(self) -> IterateRecord:
        from lbi_engine.solvers._monitor import problem_ssim

        problem = self.problem
        extras = dict(self.extras)  # no warm state: its rows were the last batch's only
        extras["stop_iterations"] = list(self.iterations)
        return IterateRecord(
            method="joint", iteration=max(self.iterations), x=self.x, aux=self.aux,
            objective=self.objective, bregman_terms=self.bregman, reg_term=self.reg,
            discrepancy=self.discrepancy, primal_residual=self.primal,
            dual_residual=self.dual, elapsed=self.monitor.watch.elapsed,
            active=torch.zeros(problem.batch, dtype=torch.bool, device=problem.device),
            psnr=self.psnr, ssim=problem_ssim(problem, self.x), final=True,
            stop_reasons=list(self.reasons), extras=extras)
