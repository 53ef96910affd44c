"""Alpha "auto" by continuation on the exact problem, then the lifted solve from its end
(MATH.md §5.8): the default start of the joint method on networks read from a file.

The lifted objective is not jointly convex, so where the joint method starts decides where
it ends, and its α search costs several lifted solves of thousands of steps each. This room
instead walks α down a geometric path on the *exact* problem

    min_x  ½‖N(x) − y_δ‖² + α TV_ε(x)       (TV_ε: TV with √(|∇x|² + ε²), ε = 1e-3 range)

by L-BFGS through lbi's own lifted forward (never the file's code), each point warm-started
at the last, from an α at which the answer is nearly flat. Starting flat and lowering α is
what keeps L-BFGS out of the poor stationary points a cold start from mid-grey finds on
ReLU and max-pool networks (measured on the held-out evaluation's calibration half:
docs/developer/calibration.md). The path's residuals choose α:

* with a noise level, the discrepancy principle: the first point whose residual is at most
  ``TAU`` δ ends the walk, and α is the log-linear interpolation between it and the point
  before, solved once more from the more regular one; where the first α already fits the
  target, the walk goes up instead until the residual passes it;
* the residual floor: when a step of the path lowers the residual by less than
  ``FLOOR_DROP`` (relative), once the residual has fallen that much below the first
  point's (before, the image can still be flat), more α buys no fit (an over-determined
  network, or one whose range the noisy code has left) and the walk ends there; without a
  noise level this is the only rule, with ``LOWEST`` (relative to the first α) as the end
  of the path.

Then the lifted joint method runs at the chosen α from the path's end with the auxiliary
variables at its forward states (a feasible point), with the exact TV, by the run's own
stop rule and at most ``REFINE_STEPS`` steps. Where the hidden-layer weight may be raised
(``joint.hidden_weight.may_raise``) it runs at ``HIDDEN_WEIGHT_RAISED``: the smooth path solved
the w → ∞ limit of the weighted lifted problem, and a penalty weight keeps the lifted answer
next to it (MATH.md §5.8).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Generator, Iterator
from typing import Any

import torch
from torch import Tensor

from lbi_engine.models.rescale import AUTO_WEIGHT, HIDDEN_WEIGHT_RAISED
from lbi_engine.operators.finite_differences import grad
from lbi_engine.protocols import Problem
from lbi_engine.solvers.alpha.exact_forward import Forward, exact_forward
from lbi_engine.solvers.alpha.path_solve import PathSolve, _with_alpha
from lbi_engine.solvers.alpha.target import expected_noise_norm, tau_for
from lbi_engine.solvers.alpha.time_split import position
from lbi_engine.solvers.base import CancelToken, IterateRecord, StopReason
from lbi_engine.solvers.choice import AlphaChoice, RunPosition, RunStage

#: the first alpha: this times ||grad_x 1/2 ||N(x) - y||^2|| at mid-grey, where TV's pull
#: outweighs the data's and the answer is close to flat
FIRST = 0.05
#: the path's factor (half a decade a step) and its length
FACTOR = 10.0 ** -0.5
MAX_POINTS = 16
#: the path ends at LOWEST times the first alpha at the latest
LOWEST = 1e-7
#: a step that lowers the residual by less than this (relative) ends the walk: the floor
FLOOR_DROP = 0.05
#: L-BFGS evaluations per path point at most, in chunks of CHUNK; a point ends when a chunk
#: lowers its objective by at most SETTLE (relative). A point in the walk only has to keep the
#: next one in its basin; the first (from the flat image) and the chosen alpha (the
#: discrepancy's interpolated point, or the path's end solved on) are solved further, the
#: last with the tighter FINAL_SETTLE (the budgets' calibration: docs/developer/calibration.md)
POINT_ITERATIONS = 40
FIRST_ITERATIONS = 100
FINAL_ITERATIONS = 150
CHUNK = 10
SETTLE = 1e-3
FINAL_SETTLE = 1e-4
HISTORY = 20
#: TV's smoothing, relative to the image's value range
EPSILON = 1e-3
#: the lifted solve's steps from the path's end at most (it also stops by the run's rule)
REFINE_STEPS = 100
#: seconds between the progress records of a path point while it runs
LIVE_EVERY = 0.25
#: the largest share of a point's time its progress records may take (each evaluates the
#: lifted objective, several forwards on a deep network)
LIVE_SHARE = 0.05
RULE = "continuation"
#: the discrepancy target's factor (None: ``target.tau_for``, the lifted search's). The
#: lifted search's tau(rho) < 1 was fitted on converged solves; a path point is a
#: warm-started approximation whose residual sits nearer the noise, and on the calibration
#: half the best path point's residual lay at 0.8-0.95 delta (docs/developer/calibration.md)
TAU: float | None = 0.9


@dataclasses.dataclass
class SmoothPoint:
    """One solved point of the path: alpha, its residual ||N(x) - y|| (sample 0), the
    L-BFGS evaluations it took, its solver seconds and its PSNR (sample 0, None without a
    ground truth)."""

    alpha: float
    discrepancy: float
    evaluations: int
    seconds: float
    psnr: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def applies(problem: Problem) -> bool:
    """Whether the continuation can run here: an image-shaped TV regulariser (isotropic,
    the smooth surrogate's) on a network with hidden layers."""
    inner = getattr(problem.reg, "inner", problem.reg)
    return (getattr(inner, "name", "") == "tv" and problem.depth > 1
            and len(getattr(problem.reg, "image_shape", ())) >= 2)


def _smooth_tv(problem: Problem, x: Tensor) -> Tensor:
    """sum_pixels sqrt(|grad x|^2 + eps^2), the channels' components coupled as lbi's TV."""
    reg = problem.reg
    image = x.reshape(x.shape[0], *reg.image_shape)
    g = grad(image)
    eps = EPSILON * float(problem.data_range)
    return torch.sqrt((g * g).sum(dim=tuple(range(1, g.ndim - 2))) + eps * eps).sum()


class _Cancelled(Exception):
    pass


def _lbfgs(problem: Problem, forward: Forward, x: Tensor, alpha: float, iterations: int,
           cancel: CancelToken | None, settle: float = SETTLE,
           ) -> Generator[tuple[Tensor, int], None, tuple[Tensor, int]]:
    """L-BFGS (strong Wolfe) on 1/2 ||N(x) - y||^2 + alpha TV_eps(x) from ``x``, in chunks
    of ``CHUNK`` evaluations until a chunk lowers the objective by at most ``settle``
    (relative) or ``iterations`` evaluations are spent. Yields (x, evaluations so far) after
    each chunk the point goes on from; returns the new x and the evaluations."""
    y = problem.y_delta
    var = x.detach().clone().requires_grad_(True)
    evaluations = 0
    last = math.inf

    def closure() -> Tensor:
        nonlocal evaluations, last
        if cancel is not None and cancel.cancelled:
            raise _Cancelled
        opt.zero_grad()
        evaluations += 1
        loss = 0.5 * (forward(var) - y).pow(2).sum() + alpha * _smooth_tv(problem, var)
        loss.backward()
        last = float(loss.detach())
        return loss

    before = math.inf
    while evaluations < iterations:
        chunk = min(CHUNK, iterations - evaluations)
        # the optimiser keeps its curvature pairs from chunk to chunk (its state)
        if evaluations == 0:
            opt = torch.optim.LBFGS([var], lr=1, max_iter=chunk, max_eval=chunk,
                                    history_size=HISTORY, line_search_fn="strong_wolfe",
                                    tolerance_grad=1e-12, tolerance_change=1e-12)
        else:
            opt.param_groups[0].update(max_iter=chunk, max_eval=chunk)
        spent = evaluations
        with torch.enable_grad():
            opt.step(closure)
        if evaluations == spent or not math.isfinite(last) or \
                before - last <= settle * abs(last):
            break
        before = last
        if evaluations < iterations:
            yield var.detach(), evaluations
    out = var.detach()
    return (out if bool(torch.isfinite(out).all()) else x), evaluations


def _solve_point(problem: Problem, forward: Forward, x: Tensor, alpha: float, iterations: int,
                 cancel: CancelToken | None, clock: float, point: int, spent: int,
                 settle: float = SETTLE) -> Generator[IterateRecord, None, tuple[Tensor, int]]:
    """One path point by :func:`_lbfgs`, with a progress record (the iterate so far) at most
    every ``LIVE_EVERY`` seconds while it runs, so the window and the progress line move
    within a point too; returns the point's x and evaluations."""
    solving = _lbfgs(problem, forward, x, alpha, iterations, cancel, settle)
    shown, gap = time.perf_counter(), LIVE_EVERY
    while True:
        try:
            now, used = next(solving)
        except StopIteration as done:
            return done.value
        if time.perf_counter() - shown >= gap:
            began = time.perf_counter()
            change = float(torch.linalg.vector_norm(now - x) /
                           torch.linalg.vector_norm(now).clamp_min(1e-12))
            record = _record(problem, now.clone(), alpha, spent + used, began - clock, point,
                             change)
            shown = time.perf_counter()
            # a record costs a lifted objective: at most LIVE_SHARE of the point's time
            gap = max(LIVE_EVERY, (shown - began) / LIVE_SHARE)
            yield record


def first_alpha(problem: Problem, x: Tensor, forward: Forward | None = None) -> float:
    """FIRST times the data term's gradient norm at ``x`` (sample 0)."""
    var = x[:1].detach().clone().requires_grad_(True)
    with torch.enable_grad():
        loss = 0.5 * ((forward or problem.network.forward)(var) - problem.y_delta[:1]).pow(2).sum()
        loss.backward()
    assert var.grad is not None
    norm = float(torch.linalg.vector_norm(var.grad))
    return FIRST * norm if math.isfinite(norm) and norm > 0 else 1.0


def _residual(problem: Problem, forward: Forward, x: Tensor) -> float:
    with torch.no_grad():
        return float(torch.linalg.vector_norm(forward(x[:1])
                                              - problem.y_delta[:1]))


def _record(problem: Problem, x: Tensor, alpha: float, evaluations: int, elapsed: float,
            point: int, change: float) -> IterateRecord:
    """A progress record of a path point (non-final): the lifted objective at the feasible
    point (x, its forward states)."""
    from lbi_engine import metrics

    with torch.no_grad():
        at = _with_alpha(problem, alpha)
        aux = problem.forward_aux(x)
        parts = at.objective_parts(x, aux)
        psnr = None if problem.x_true is None else metrics.psnr(
            x, problem.x_true, data_range=problem.data_range)
    batch = problem.batch
    zeros = torch.zeros(batch, dtype=x.dtype, device=x.device)
    return IterateRecord(
        method="joint", iteration=evaluations, x=x.clone(), aux=[a.clone() for a in aux],
        objective=parts["total"], bregman_terms=parts["bregman"], reg_term=parts["reg"],
        discrepancy=parts["discrepancy"], primal_residual=zeros + change,
        dual_residual=zeros, elapsed=elapsed,
        active=torch.ones(batch, dtype=torch.bool, device=x.device), psnr=psnr,
        stage=f"alpha path: {alpha:.3g}",
        position=position(point, MAX_POINTS, alpha))


def _point_done(problem: Problem, forward: Forward, path: list[SmoothPoint], x: Tensor,
                alpha: float, used: int, started: float, evaluations: int, clock: float,
                point: int, change: float) -> IterateRecord:
    """Appends the solved point to ``path`` (with its PSNR) and returns its record."""
    path.append(SmoothPoint(alpha, _residual(problem, forward, x), used,
                            time.perf_counter() - started))
    shown = _record(problem, x, alpha, evaluations, time.perf_counter() - clock, point, change)
    path[-1].psnr = None if shown.psnr is None else float(shown.psnr[0])
    return shown


def stream_continuation(problem: Problem, solve: PathSolve, *, noise_std: float | None,
                        cancel: CancelToken | None = None, time_budget: float | None = None,
                        max_iter: int | None = None) -> Iterator[IterateRecord]:
    """Chooses alpha on the exact problem's continuation path, then yields the lifted
    solve's records from the path's end; the last record is final and its ``choice`` holds
    the alpha, the rule ("continuation: discrepancy" or "continuation: floor"), the path
    and the time split as :func:`whole.stream_alpha`'s does. ``max_iter``
    bounds the path's L-BFGS evaluations (a record's iteration counts them); the lifted
    solve has the run's own stop rule, as the final solve after any search."""
    clock = time.perf_counter()
    lo = -float(problem.display_offset)
    hi = float(problem.data_range) - float(problem.display_offset)
    x = torch.full_like(problem.zeros_input(), 0.5 * (lo + hi))
    target = None
    if noise_std is not None and noise_std > 0:
        delta = expected_noise_norm(problem, noise_std)
        target = (tau_for(problem, delta) if TAU is None else TAU) * delta
    forward, source = exact_forward(problem, x)
    alpha = first_alpha(problem, x, forward)
    lowest = alpha * LOWEST
    path: list[SmoothPoint] = []
    states: list[Tensor] = []
    evaluations = 0
    why = "floor"
    stopped: str | None = None
    rising = False  # the first alpha already fitted the target: the walk goes up instead
    try:
        for point in range(1, MAX_POINTS + 1):
            # the first point starts from the flat image, the others from their neighbour
            budget = FIRST_ITERATIONS if point == 1 else POINT_ITERATIONS
            left = budget if max_iter is None else min(budget, max_iter - evaluations)
            if left < 1:
                break
            started = time.perf_counter()
            new, used = yield from _solve_point(problem, forward, x, alpha, left, cancel, clock,
                                                point, evaluations)
            evaluations += used
            change = float(torch.linalg.vector_norm(new - x) /
                           torch.linalg.vector_norm(new).clamp_min(1e-12))
            x = new
            states.append(x)
            yield _point_done(problem, forward, path, x, alpha, used, started, evaluations,
                              clock, point, change)
            if time_budget is not None and time.perf_counter() - clock > time_budget:
                stopped = StopReason.TIME_BUDGET.value
                break
            r = path[-1].discrepancy
            if max_iter is not None and evaluations >= max_iter:
                break
            if target is not None:
                if len(path) == 1 and r <= target:
                    rising, why = True, "above the first alpha"
                elif (r > target) == rising:  # the residual crossed the target
                    why = "discrepancy"
                    break
            # a floor is where the fit stops improving after it began: at the first points
            # the image can still be flat, its residual that of the flat image, unmoved
            fitting = r < (1.0 - FLOOR_DROP) * path[0].discrepancy
            if not rising and fitting and r >= (1.0 - FLOOR_DROP) * path[-2].discrepancy:
                break
            if alpha * FACTOR < lowest:
                break
            alpha = alpha / FACTOR if rising else alpha * FACTOR
        start: Tensor | None = None
        left = FINAL_ITERATIONS if max_iter is None else min(FINAL_ITERATIONS,
                                                              max_iter - evaluations)
        if left >= 1 and why == "discrepancy" and len(path) >= 2:
            # log-linear interpolation between the bracket's ends, solved from the one above
            up = len(path) - 1 if rising else len(path) - 2
            above, below = path[up], path[up - 1 if rising else up + 1]
            slope = math.log(above.discrepancy / below.discrepancy)
            share = (math.log(above.discrepancy / target) / slope  # type: ignore[operator]
                     if slope > 0 else 1.0)
            alpha = math.exp(math.log(above.alpha) + min(max(share, 0.0), 1.0)
                             * math.log(below.alpha / above.alpha))
            start = states[up]
        elif left >= 1 and stopped is None and FINAL_ITERATIONS > POINT_ITERATIONS:
            start = x  # the path's end, solved on at its alpha
        if start is not None:
            started = time.perf_counter()
            x, used = yield from _solve_point(problem, forward, start, alpha, left,
                                              cancel, clock, len(path) + 1, evaluations,
                                              FINAL_SETTLE)
            evaluations += used
            yield _point_done(problem, forward, path, x, alpha, used, started, evaluations,
                              clock, len(path) + 1, 0.0)
    except _Cancelled:
        stopped = StopReason.CANCELLED.value
    searched = time.perf_counter() - clock
    x = x.clamp(lo, hi)
    lifted = problem
    if problem.extras.get(AUTO_WEIGHT) is not None:  # the api marked: the weight may rise
        lifted = dataclasses.replace(problem, extras={**problem.extras,
                                                      AUTO_WEIGHT: HIDDEN_WEIGHT_RAISED})
    with torch.no_grad():
        init: dict[str, Any] = {"x": x, "aux": problem.forward_aux(x), "iteration": evaluations}
    rule = f"{RULE}: {why}"
    yield from _final(lifted, solve, alpha, init, rule, path, searched, target, stopped,
                      source)


def _ssim(problem: Problem, record: IterateRecord) -> Tensor | None:
    """SSIM of a record the schedule ends (the monitor computes it on final records only)."""
    from lbi_engine.solvers._monitor import problem_ssim

    return None if problem.x_true is None else problem_ssim(problem, record.x)


def _final(problem: Problem, solve: PathSolve, alpha: float, init: dict[str, Any], rule: str,
           path: list[SmoothPoint], searched: float, target: float | None,
           stopped: str | None, source: str) -> Iterator[IterateRecord]:
    """The lifted solve at ``alpha`` from ``init``; its last record carries the choice."""
    previous: IterateRecord | None = None
    for record in solve(_with_alpha(problem, alpha), init, None):
        record.elapsed += searched
        record.position = RunPosition("final solve")
        if stopped is not None:  # cancelled or out of time on the path: its first record
            previous = dataclasses.replace(record, final=True,
                                           stop_reasons=[stopped] * problem.batch)
            break
        if previous is not None:
            yield previous
        previous = record
        if not record.final and record.iteration - init["iteration"] >= REFINE_STEPS:
            # the schedule's end: the path and REFINE_STEPS lifted steps (MATH.md §5.8)
            previous = dataclasses.replace(record, final=True, stop_reasons=[
                StopReason.FINISHED.value] * problem.batch, ssim=_ssim(problem, record))
            break
    assert previous is not None
    steps = int(previous.iteration - init["iteration"])
    weight = 1.0 if previous.hidden_weight is None else previous.hidden_weight
    previous.choice = AlphaChoice(
        alpha, rule, [p.to_dict() for p in path], target, float(previous.elapsed),
        steps + sum(p.evaluations for p in path),
        [RunStage("start", 0, 0.0)]
        + [RunStage("alpha search", p.evaluations, p.seconds, p.alpha, None, k + 1)
           for k, p in enumerate(path)]
        + [RunStage("final solve", steps, float(previous.elapsed) - searched, alpha, weight)],
        path_forward=source,
    )
    if weight != 1.0:
        previous.choice.hidden_weight_rule = (
            "the continuation path's start solved the exact problem, the large-weight "
            "limit (MATH.md §5.8)")
    previous.stage = f"alpha {alpha:.3g} ({rule})"
    yield previous
