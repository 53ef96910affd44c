"""The one run loop of every iterative method (the shape of CIL's ``Algorithm``).

A method is a :class:`Method`: its state lives in buffers it made once, :meth:`Method.step`
advances it by one iteration (in place, with ``out=`` where it pays) and :meth:`Method.state`
shows the current iterate. Everything else is the driver's and the monitor's
(``_monitor.RunMonitor``), identical for every method:

* iteration counting (continued from a warm start's ``init["iteration"]``);
* the stop rule (StopRule: max_iter, tol in its three modes, the objective-settled rule at
  each record, time budget), cancellation before every iteration, divergence (non-finite
  iterates inside ``monitor.accept``/the blocks, blow-up of the objective at records);
* records every ``report_every`` iterations and a final one with the stop reasons, handed to
  the optional ``callbacks`` before they are yielded;
* solver time that pauses while the caller holds a record (``Stopwatch``).

CIL's ``Algorithm`` has ``set_up`` / ``update`` / ``update_objective`` / ``should_stop`` /
``run``; here ``__init__`` is set-up, ``step`` is update, the objective is computed when a
record is built (``monitor.record``, or :meth:`Method.objective_parts` for a stage whose
objective is not the problem's), and should-stop is the monitor's.

One iteration of the loop, in order (the order the per-method loops had, which the stop
reasons and iteration counts depend on)::

    method.check(monitor)            # optional: a rule on the current iterate (Landweber)
    monitor.before_iteration()       # cancel, time budget, max_iter -> stop
    changes = method.step(monitor)   # one iteration; per-sample changes of x (and dual)
    monitor.iteration += 1
    monitor.converged(*changes)      # tol (relative/absolute modes); skipped when None
    method.after_step(monitor)       # optional: e.g. the optimality residual rule
    if running and due: record       # (the objective rule runs inside monitor.record)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch import Tensor

from lbi_engine.protocols import Problem
from lbi_engine.settings.solver import SolverOptions
from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.base import CancelToken, IterateRecord, StopRule

Callback = Callable[[IterateRecord], object]
Changes = tuple[Tensor, Tensor | None]


class Method(ABC):
    """One iterative method on the driver (subclass it; see the module docstring)."""

    @abstractmethod
    def step(self, monitor: RunMonitor) -> Changes | None:
        """One iteration on the running samples; returns the per-sample changes of the
        primal and (or None) of the dual/auxiliary variables, as StopRule.tol_mode measures
        them, or None when it noted them with ``monitor.note_change_later`` (allowed where
        ``monitor.changes_read_at_records()``). Stopped samples (``monitor.active`` false)
        must keep their iterate."""

    @abstractmethod
    def state(self) -> tuple[Tensor, list[Tensor]]:
        """The current (x_0, [x_1 .. x_{L-1}]) (may be live buffers: records copy them)."""

    def check(self, monitor: RunMonitor) -> None:  # noqa: B027 - an optional hook
        """Before the stop test of every iteration (default: nothing)."""

    def after_step(self, monitor: RunMonitor) -> None:  # noqa: B027 - an optional hook
        """After the iteration count and the tol rule of every iteration (default: nothing)."""

    def objective_parts(self) -> dict[str, Tensor] | None:
        """The record's objective parts; None: the problem's objective at :meth:`state`."""
        return None

    def record(self, monitor: RunMonitor, final: bool = False) -> IterateRecord:
        """A record of the current state (override to add extras first)."""
        x, aux = self.state()
        return monitor.record(x, aux, final=final, parts=self.objective_parts())


def _hook(method: Method, name: str) -> Callable[[RunMonitor], None] | None:
    """The bound hook when the method overrides it, else None (no call per iteration)."""
    if getattr(type(method), name) is getattr(Method, name):
        return None
    return getattr(method, name)


def iterate(method: Method, monitor: RunMonitor,
            callbacks: Iterable[Callback] = ()) -> Iterator[IterateRecord]:
    """The loop: iterations until the monitor stops every sample, a record every
    ``report_every`` iterations. Yields no first and no final record (see :func:`drive`);
    a staged method (layer-wise) runs this once per stage on one monitor."""
    callbacks = tuple(callbacks)
    check, after = _hook(method, "check"), _hook(method, "after_step")
    step, converged = method.step, monitor.converged
    monitor.watch.start()
    with torch.no_grad():
        while True:
            if check is not None:
                check(monitor)
            if not monitor.before_iteration():
                break
            changes = step(monitor)
            monitor.iteration += 1
            if changes is not None:
                converged(*changes)
            if after is not None:
                after(monitor)
            if monitor.running and monitor.due():
                yield _emit(method.record(monitor), callbacks)
    monitor.watch.pause()


def drive(method: Method, monitor: RunMonitor,
          callbacks: Iterable[Callback] = ()) -> Iterator[IterateRecord]:
    """A whole run: the record of the start, :func:`iterate`, the final record."""
    callbacks = tuple(callbacks)
    yield _emit(method.record(monitor), callbacks)
    yield from iterate(method, monitor, callbacks)
    yield _emit(method.record(monitor, final=True), callbacks)


def _emit(record: IterateRecord, callbacks: tuple[Callback, ...]) -> IterateRecord:
    for callback in callbacks:
        callback(record)
    return record


def new_monitor(problem: Problem, name: str, stop: StopRule, cancel: CancelToken | None,
                report_every: int, init: dict[str, Any] | None) -> RunMonitor:
    """The run's monitor; a warm start (``init["iteration"]``) continues the count."""
    start = int((init or {}).get("iteration", 0))
    return RunMonitor(problem, name, stop, cancel, report_every, start_iteration=start)


#: what a method does once its run is set up: (problem, options, init, monitor) -> records,
#: the stop rule in ``monitor.stop``
MethodBody = Callable[..., Iterator[IterateRecord]]


def run(method: str, body: MethodBody, problem: Problem, stop: StopRule,
        options: SolverOptions, init: dict[str, Any] | None, cancel: CancelToken | None,
        report_every: int, **keywords: Any) -> Iterator[IterateRecord]:
    """Runs ``body`` as method ``method``: the prologue every method shares, the warm start
    ``init`` (``{}`` for none) and the run's monitor (a warm start continues the iteration
    count), then ``body(problem, options, init, monitor, **keywords)``. A method's
    ``run_<name>`` is ``functools.partial(run, name, body)``, the signature of
    ``solvers.METHODS``."""
    init = init or {}
    monitor = new_monitor(problem, method, stop, cancel, report_every, init)
    yield from body(problem, options, init, monitor, **keywords)


__all__ = ["Callback", "Changes", "Method", "MethodBody", "drive", "iterate", "new_monitor", "run"]
