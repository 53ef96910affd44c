"""How the joint iteration takes a step: one strategy per state, chosen when it is made
(``fista.choose_step``).

Every strategy takes the same step: the prox-gradient step from y (``JointFista.propose``),
then FISTA's momentum with the gradient restart per sample (<y - x+, x+ - x> > 0 restarts;
``operators.momentum``), the next y = x+ + coef (x+ - x), and the slots rotated. They differ
in how, and in what they measure:

- :class:`BatchStep`: torch operations on the batch. The monitor vets the proposed iterate
  (finiteness, frozen samples) and measures its change: the whole iterate's under the
  objective rule (only the records read it), else each block's (the worst one counts).
- :class:`OneSampleStep`: one sample under the objective rule. Finiteness comes for free
  with the restart test (<y - x+, x+ - x> is finite iff x+ is), so no per-step norms; the
  change is measured for the records only (``JointFista.last_change``).
- ``compiled_step.CompiledStep``: the same for one sample with everything after the gradient
  in compiled loops, where numba is usable and the blocks are ReLU's.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
from torch import Tensor

from lbi_engine.operators.momentum import ScalarMomentum
from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.base import StopReason
from lbi_engine.solvers.driver import Changes
from lbi_engine.solvers.joint.state import FistaState


class JointStep(Protocol):
    """A way of taking the joint step on a state (see the module docstring)."""

    #: whether step() returns the measured change (else inf, and the records measure it)
    measures_change: bool

    def step(self, state: FistaState, monitor: RunMonitor) -> Changes:
        """One step: the new iterate accepted into ``state``; its per-sample change."""
        ...

    def pre_activations(self, state: FistaState) -> list[Tensor] | None:
        """W_l x_l + b_l of the current iterate per layer, where the strategy keeps them."""
        ...


def restart_and_extrapolate(state: FistaState, dot: Tensor | float) -> None:
    """The momentum's next coefficient from the restart test's ``dot`` (per sample, or a
    number for one sample), y = x+ + coef (x+ - x) (x+ - x in the scratch slot), and the
    slots rotated."""
    new, step = state.slots[state.slot_new], state.slots[state.slot_scratch]
    momentum = state.momentum
    if isinstance(momentum, ScalarMomentum):  # one sample: Python numbers
        coef = momentum.advance(float(dot) > 0)
        torch.add(new, step, alpha=coef, out=state.y)
    else:
        assert isinstance(dot, Tensor)  # a batch: one dot per sample
        coefs = momentum.advance(dot > 0)
        torch.addcmul(new, coefs.reshape(-1, 1), step, out=state.y)
    state.rotate()


class BatchStep:
    """torch operations on the batch, the proposed iterate vetted by the monitor."""

    measures_change = True

    def __init__(self, whole: bool) -> None:
        #: the objective rule: the change of the whole iterate (one check for finiteness
        #: and frozen samples, not one per block); else the worst block's
        self.whole = whole

    def step(self, state: FistaState, monitor: RunMonitor) -> Changes:
        blocks = state.propose()
        new = state.slots[state.slot_new]
        change: Tensor | None = None
        if self.whole:
            vetted, change = monitor.accept(new, state.slots[state.slot_x])
            if vetted is not new:  # frozen samples keep their iterate
                new.copy_(vetted)
        else:
            for block, old in zip(blocks, state.xs, strict=True):
                vetted, moved = monitor.accept(block, old)
                if vetted is not block:
                    block.copy_(vetted)
                change = moved if change is None else torch.maximum(change, moved)
        assert change is not None  # xs holds x_0 at least
        x, scratch = state.slots[state.slot_x], state.slots[state.slot_scratch]
        step = torch.sub(new, x, out=scratch)
        dot = torch.sub(state.y, new, out=state.grad).mul_(step).sum(dim=1)
        restart_and_extrapolate(state, dot)
        return change, None

    def pre_activations(self, state: FistaState) -> list[Tensor] | None:
        return None


class OneSampleStep:
    """One sample under the objective rule, in torch operations (see the module docstring)."""

    measures_change = False

    def __init__(self, state: FistaState) -> None:
        problem = state.problem
        # what step() reports as the change: it is only measured for the records
        self.unmeasured = torch.full((problem.batch,), math.inf, dtype=problem.dtype,
                                     device=problem.device)

    def step(self, state: FistaState, monitor: RunMonitor) -> Changes:
        if not self.advance(state):
            monitor.finish(monitor.active.clone(), StopReason.DIVERGED)
        return self.unmeasured, None

    def advance(self, state: FistaState) -> bool:
        """The step; False, keeping the current iterate, where the new one is not finite."""
        state.propose()
        new, x = state.slots[state.slot_new], state.slots[state.slot_x]
        step = torch.sub(new, x, out=state.slots[state.slot_scratch])
        # one pass over both vectors (a product and a sum would be two)
        dot = float(torch.dot(torch.sub(state.y, new, out=state.grad).view(-1), step.view(-1)))
        if not math.isfinite(dot):
            return False
        restart_and_extrapolate(state, dot)
        return True

    def pre_activations(self, state: FistaState) -> list[Tensor] | None:
        return None
