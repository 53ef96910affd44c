"""Choosing alpha from the data for a whole-network run (alpha "auto" of every method the
``api`` runs): warm-started solves at a few alphas, each starting where the last one ended.
The walk, the quasi-optimality function, the interpolation and the ratio are ``path.py``'s;
the rules and their calibration are here.

Why warm starts: the solution moves continuously with alpha, so each solve starts next to
its answer and needs a fraction of a cold solve's iterations. A path solve ends when its
residual and objective have settled (``PATH_RTOL``), not by the run's own stop rule, because
the rules read the residual. Then:

``discrepancy`` (needs the noise level): Morozov's principle with a model-aware target. The
residual ||N(x_alpha) - y_delta|| is matched to tau * delta, delta the expected noise norm
(from the per-entry std, for clipped ReLU outputs by ``noise.expected_clipped_residual``).
The search (``_discrepancy_search``) starts at :func:`first_guess` (alpha proportional to
delta), takes secant steps on log residual against log alpha, and stays inside the bracket
once it has one; it stops when a solve's residual is within 3 % of the target, and the run
continues that solve at the run's own stop rule. On the MNIST CNN it needs 2-4 solves where
the earlier fixed quarter-decade walk from alpha 0.1 needed 5-9.

Why tau < 1 (``TAU``): a regularised estimate fits part of the noise. For a linear smoother
H, E||r||^2 = ||(I - H) y||^2 + std^2 (m - 2 tr H + tr H^T H), about std^2 (m - df) with df
its effective degrees of freedom, below the noise's std^2 m; so the residual of a good alpha
lies below delta and tau = 1 over-smooths (Morozov's tau >= 1 guards a worst case, not the
mean). On ``mnist-cnn-ae`` (encoder 784 -> 300, full row rank, so every noise direction can
be fitted) the residual at the best alpha of a tight grid is 0.58-0.71 delta at std 0.01,
0.72-0.83 at 0.05, 0.81-0.88 at 0.1 and 0.33 (4 training digits): df shrinks as the noise
grows. Without a cheap estimate of df(alpha), tau follows the relative noise of the code,
rho = delta / ||y_delta||: tau(rho) = 0.85 + 0.2 log10(rho / 0.12), clipped to [0.6, 0.85],
fitted on TRAINING digits from converged solves (``python -m benchmarks.studies.calibrate_alpha``,
std 0.01-0.33, both MNIST autoencoders; benchmarks/NOTES.md has the tables). One constant did
not do: on the CNN, 0.85 lost 0.62 dB at std 0.01 and 0.8 lost 0.49 dB at std 0.33 (training
digits), and on validation digits each lost more than 1 dB at one end (docs/REPRODUCTION.md).

``quasi-optimality`` (needs nothing): the alpha_k minimising ||x_k - x_{k+1}|| between
neighbours of a geometric path from ``ALPHA_START`` down (Tikhonov & Glasko; Bauer & Reiss
2008 for its analysis): no noise level needed, at the price of walking the whole path down
to ``alpha_min``.

The module is engine-level (problems, solvers, records), so the API, the CLI, the GUI worker
and the sweeps share it.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Generator, Iterator
from typing import Any

from torch import Tensor

from lbi_engine.errors import InputError
from lbi_engine.models.rescale import AUTO_WEIGHT, HIDDEN_WEIGHT_RAISED
from lbi_engine.protocols import Problem
from lbi_engine.settings.solver import ALPHA_RULES as RULES
from lbi_engine.settings.solver import ALPHA_START
from lbi_engine.solvers.alpha.path import (
    QuasiOptimality,
    discrepancy_ratio,
    quasi_optimality_walk,
)
from lbi_engine.solvers.alpha.path_solve import (
    PathSolve,
    _solve_at,
    _with_alpha,
)
from lbi_engine.solvers.alpha.residual_path import (
    MATCH,
    MAX_JUMP,
    MAX_POINTS,
    RAISED_SLOPE,
    PathPoint,
    _fit_floor,
    _interpolate,
    _local_slope,
    _nearest,
    _out_of_reach,
)
from lbi_engine.solvers.alpha.target import (
    ALPHA_MAX,
    ALPHA_MIN,
    TAU_BOX,
    _boxed,
    expected_noise_norm,
    first_guess,
    tau_for,
)
from lbi_engine.solvers.alpha.time_split import position, positioned, time_split
from lbi_engine.solvers.base import IterateRecord
from lbi_engine.solvers.choice import AlphaChoice, RunPosition

FACTOR = 10.0 ** -0.25
#: Quasi-optimality's path solves end by the objective rule at this tolerance, as before the
#: discrepancy search: the rule compares neighbouring iterates, and ending them by
#: :class:`_Settled` made its choice noisier (0.75 against 0.49 dB from the best grid alpha at
#: std 0 in the noise study).
QUASI_TOL = 1e-3


#: Quasi-optimality on a whole network: the global minimum on a quarter-decade path from
#: ALPHA_START down to ALPHA_MIN (``stream_alpha``'s start, factor and alpha_min override).
QUASI = QuasiOptimality(ALPHA_START, FACTOR, ALPHA_MIN, ALPHA_MAX, "global")


def _warm(record: IterateRecord, problem: Problem) -> dict[str, Any]:
    """A record's state as the next solve's start; momentum is not carried across alphas
    (the accelerated method restarts it); the iteration count goes on."""
    from lbi_engine.solvers import warm_start

    init = warm_start(record, problem)
    for key in ("x_prev", "momentum"):
        init.pop(key, None)
    return init


def _point(alpha: float, first: IterateRecord, last: IterateRecord) -> PathPoint:
    psnr = None if last.psnr is None else float(last.psnr[0])
    return PathPoint(alpha, float(last.discrepancy[0]), float(last.reg_term[0]),
                     float(last.objective[0]), int(last.iteration - first.iteration),
                     float(last.elapsed), psnr)


_FATAL = ("cancelled", "time_budget", "diverged")

def stream_alpha(problem: Problem, solve: PathSolve, *,
                 noise_std: float | None, rule: str | None = None, tau: float | None = None,
                 start: float | None = None, alpha_min: float = ALPHA_MIN,
                 factor: float = FACTOR) -> Iterator[IterateRecord]:
    """Applies ``rule`` (default: discrepancy with a noise level, else quasi-optimality) and
    yields every record on the way, like one solver run: only the last record is final, and
    its ``choice`` holds the alpha, the rule and the path (see :class:`AlphaChoice`).
    ``solve(problem, init, path_tol)`` runs the method and yields its records (see
    ``PathSolve``); each record's ``stage``
    names the alpha it belongs to. ``start``: the first alpha (default: :func:`first_guess`
    for the discrepancy rule, ``ALPHA_START`` for quasi-optimality). Uses sample 0.

    A regulariser with a calibrated weight of its own (``alpha_for_noise(std)``: the Gaussian
    input prior, MATH.md §4.3) takes that weight when no rule is named and the noise level is
    known: one solve, no path."""
    inner = getattr(problem.reg, "inner", problem.reg)
    scaled = getattr(inner, "alpha_for_noise", None)
    if rule is None and scaled is not None and noise_std is not None and noise_std > 0:
        yield from _noise_scaled(problem, solve, float(scaled(noise_std)),
                                 str(getattr(inner, "noise_alpha_rule", "noise-scaled")))
        return
    rule = rule or ("discrepancy" if noise_std is not None and noise_std > 0
                    else "quasi-optimality")
    if rule not in RULES:
        raise InputError(f"alpha rule {rule!r}: choose one of {', '.join(RULES)}.")
    if rule == "discrepancy" and not (noise_std is not None and noise_std > 0):
        raise InputError("the discrepancy rule needs the noise level: give --noise-level S "
                         "(the per-entry std of the measurement noise) or use quasi-optimality.")
    unweighted: list[PathPoint] = []  # a search at weight 1 that a raised one replaced
    if rule == "discrepancy":
        assert noise_std is not None
        # floored: a vanishing noise level (std 1e-200) leaves no residual to match; the
        # search then ends at alpha_min, the formula's limit
        delta = expected_noise_norm(problem, noise_std)
        tau = tau if tau is not None else tau_for(problem, delta) * (
            TAU_BOX if _boxed(problem) else 1.0)
        target = max(tau * delta, 1e-300)
        clock = time.perf_counter()
        first = start if start is not None else first_guess(problem, target)
        guessing = time.perf_counter() - clock  # solver time too (26 forward passes)
        path, finals, chosen, near = yield from _discrepancy_search(
            problem, solve, target, first, alpha_min, guessing)
        raised = _raised_weight(problem, path[near], target)
        if raised is not None:  # the lifted states absorbed the fit: search again, weighted,
            # from the closest unweighted fit (its states are the network's own: the solver
            # rescales them at its border)
            unweighted, problem = path, raised
            guessing += sum(p.seconds for p in unweighted)
            path, finals, chosen, near = yield from _discrepancy_search(
                problem, solve, target, first_guess(problem, target), alpha_min, guessing,
                _warm(finals[near], problem), RAISED_SLOPE)
    else:
        target, guessing, raised = None, 0.0, None
        rule_path = dataclasses.replace(QUASI, start=ALPHA_START if start is None else start,
                                        factor=factor, lowest=alpha_min)
        path, finals, near = yield from _geometric_path(problem, solve, rule_path)
        chosen = path[near].alpha
    # The result: a warm solve at the chosen alpha from the path point ``near`` (at a path
    # point it continues that point's iterate, so it only confirms convergence).
    seconds = sum(p.seconds for p in path) + guessing
    previous = None
    for record in solve(_with_alpha(problem, chosen), _warm(finals[near], problem), None):
        record.elapsed += seconds  # solver time of the whole run, path included
        record.position = RunPosition("final solve")
        if previous is not None:
            yield previous
        previous = record
    assert previous is not None and previous.final
    # every step the run took: the path solves and the final one (the final record's
    # iteration counts from the path point it continued, not every solve before it)
    steps = sum(p.iterations for p in path) + int(previous.iteration - finals[near].iteration)
    weight = 1.0 if previous.hidden_weight is None else previous.hidden_weight
    searched = [(p, 1.0) for p in unweighted] + [(p, weight) for p in path]
    previous.choice = AlphaChoice(
        chosen, rule, [p.to_dict() for p in path], target, float(previous.elapsed), steps,
        time_split(guessing - sum(p.seconds for p in unweighted), searched, chosen, weight,
                   int(previous.iteration - finals[near].iteration),
                   float(previous.elapsed) - sum(p.seconds for p in path) - guessing))
    if raised is not None:
        assert target is not None
        previous.choice.solver_steps = steps + sum(p.iterations for p in unweighted)
        previous.choice.path_unweighted = [p.to_dict() for p in unweighted]
        previous.choice.hidden_weight_rule = (
            f"raised to {HIDDEN_WEIGHT_RAISED:g}: at weight 1 the residual came no closer than "
            f"{min(p.discrepancy for p in unweighted):.4g} to the target {target:.4g}")
    previous.stage = f"alpha {chosen:.3g} ({rule})"
    yield previous


def _raised_weight(problem: Problem, nearest: PathPoint, target: float) -> Problem | None:
    """The problem with hidden weight "auto" raised to ``HIDDEN_WEIGHT_RAISED`` (MATH.md
    §5.7), when the search at weight 1 ended above its target (beyond MATCH) on a network
    where "auto" may be raised (the api marks it: ``AUTO_WEIGHT`` = 1 in ``extras``); else
    None. An unreachable target at weight 1 is the lifted states, not the input, absorbing
    the fit: on the resnet18 slice of bench_graph_slices the residual even rose as alpha fell,
    and weighting the hidden terms took it from 14.8 to 19.1 dB (L-BFGS 19.1); on the trained
    natural-res-ae the target is reached at weight 1, where it does best."""
    if problem.extras.get(AUTO_WEIGHT) != 1.0 or not math.isfinite(nearest.discrepancy) or \
            nearest.discrepancy <= target * math.exp(MATCH):
        return None
    return dataclasses.replace(problem, extras={**problem.extras,
                                                AUTO_WEIGHT: HIDDEN_WEIGHT_RAISED})


def _noise_scaled(problem: Problem, solve: PathSolve, alpha: float,
                  rule: str) -> Iterator[IterateRecord]:
    """One solve at the regulariser's own weight for the noise level (the run's stop rule)."""
    alpha = min(max(alpha, 1e-12), ALPHA_MAX)
    previous = None
    for record in solve(_with_alpha(problem, alpha), None, None):
        if previous is not None:
            yield previous
        previous = record
    assert previous is not None and previous.final
    previous.choice = AlphaChoice(
        alpha, rule, [], None, float(previous.elapsed), int(previous.iteration), time_split(
            0.0, [], alpha, 1.0 if previous.hidden_weight is None else previous.hidden_weight,
            int(previous.iteration), float(previous.elapsed)))
    previous.stage = f"alpha {alpha:.3g} ({rule})"
    yield previous


def _geometric_path(problem: Problem, solve: PathSolve, rule: QuasiOptimality,
                    ) -> Generator[IterateRecord, None, tuple[list[PathPoint],
                                                              list[IterateRecord], int]]:
    """Quasi-optimality's path (``rule``): warm solves from rule.start down to rule.lowest;
    returns the path, its final records and the chosen point (the last one when a solve
    was cancelled, ran out of time or diverged)."""
    path: list[PathPoint] = []
    finals: list[IterateRecord] = []
    points = math.ceil(math.log(rule.start / rule.lowest) / -math.log(rule.factor)) + 1

    def solve_at(alpha: float) -> Generator[IterateRecord, None, tuple[Tensor, bool]]:
        init = _warm(finals[-1], problem) if finals else None
        solving = _solve_at(problem, alpha, solve, init, f"alpha path: {alpha:.3g}",
                            sum(p.seconds for p in path), path_tol=QUASI_TOL)
        first, last = yield from positioned(solving, position(len(path) + 1, points))
        path.append(_point(alpha, first, last))
        finals.append(last)
        return last.x[:1], last.stop_reason in _FATAL

    _, k = yield from quasi_optimality_walk(rule, solve_at)
    return path, finals, len(path) - 1 if k is None else k


def _discrepancy_search(problem: Problem, solve: PathSolve, target: float, alpha: float,
                        alpha_min: float, spent: float = 0.0,
                        init: dict[str, Any] | None = None, slope: float | None = None,
                        ) -> Generator[IterateRecord, None,
                                       tuple[list[PathPoint], list[IterateRecord], float, int]]:
    """The alpha whose residual ||N(x_alpha) - y_delta|| meets ``target``: a safeguarded
    secant search on log residual against log alpha, every solve warm-started at the last.

    The residual grows with alpha (for a convex problem), close to a power law locally, so
    the secant on (log alpha, log residual) jumps near the crossing in one or two solves
    where the old fixed quarter-decade walk took 4-9 (the walk was ~90 % of a
    default run's steps). Once two points bracket the target, the next alpha is the
    interpolation between the bracket's ends (regula falsi, kept inside the bracket), so the
    search cannot leave a crossing it has found. It ends when a solve's residual is within
    ``MATCH`` (log ratio) of the target, at ``alpha_min`` / ``ALPHA_MAX`` when the target lies
    beyond them, or after ``MAX_POINTS`` solves (the bracket's interpolation). ``spent``:
    solver time before the first solve (the first guess); ``init``: the first solve's warm
    start (None: the method's own start); ``slope``: d log residual / d log alpha before two
    points measure it (None: SLOPE). Its records' ``position`` numbers its solves from 1
    (``time_split.position``; a raised search counts again, its records' hidden_weight
    says which). Returns the path, its final records, the chosen alpha
    and the path point to warm-start from."""
    path: list[PathPoint] = []
    finals: list[IterateRecord] = []
    below: int | None = None  # the path point below the target with the largest alpha
    above: int | None = None  # the path point above the target with the smallest alpha
    for _ in range(MAX_POINTS):
        solving = _solve_at(problem, alpha, solve, init, f"alpha search: {alpha:.3g}",
                            spent + sum(p.seconds for p in path))
        first, last = yield from positioned(solving, position(len(path) + 1, MAX_POINTS))
        path.append(_point(alpha, first, last))
        finals.append(last)
        init = _warm(last, problem)
        here = len(path) - 1
        residual = path[here].discrepancy
        if last.stop_reason in _FATAL or not (math.isfinite(residual) and residual > 0):
            return path, finals, alpha, here
        if abs(math.log(discrepancy_ratio(residual, target))) <= MATCH:
            return path, finals, alpha, here
        if residual <= target:
            if below is None or alpha > path[below].alpha:
                below = here
        elif above is None or alpha < path[above].alpha:
            above = here
        if below is not None and above is not None:
            lo, hi = path[below], path[above]
            next_alpha = _interpolate(lo, hi, target)
            width = math.log(hi.alpha / lo.alpha)
            if width <= 2 * MATCH:  # the bracket is narrower than the match itself
                return path, finals, next_alpha, min((below, above),
                                                     key=lambda i: abs(path[i].alpha - next_alpha))
            # stay at least a tenth of the bracket inside it (regula falsi can creep)
            log_next = min(max(math.log(next_alpha), math.log(lo.alpha) + 0.1 * width),
                           math.log(hi.alpha) - 0.1 * width)
            next_alpha = math.exp(log_next)
        else:
            if residual > target and _out_of_reach(path, target, alpha_min):
                near = _nearest(path, target)  # the closest fit: walking on buys none
                return path, finals, path[near].alpha, near
            step = math.log(target / residual) / _local_slope(path, target, slope)
            next_alpha = alpha * math.exp(min(max(step, -MAX_JUMP), MAX_JUMP))
            next_alpha = min(max(next_alpha, alpha_min), ALPHA_MAX)
            if next_alpha == alpha:  # at a bound of the range: the target lies beyond it
                if residual > target:  # no alpha fits the data that closely: see _fit_floor
                    near = _fit_floor(path)
                    return path, finals, path[near].alpha, near
                return path, finals, alpha, here
        alpha = next_alpha
    # out of solves: the bracket's interpolation, or the point nearest the target
    if below is not None and above is not None:
        chosen = _interpolate(path[below], path[above], target)
        return path, finals, chosen, min((below, above),
                                         key=lambda i: abs(math.log(path[i].alpha / chosen)))
    if all(point.discrepancy > target for point in path):  # never close enough: as below
        near = _fit_floor(path)
        return path, finals, path[near].alpha, near
    best = _nearest(path, target)
    return path, finals, path[best].alpha, best
