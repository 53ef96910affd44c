"""Choosing alpha from the data: a warm-started continuation path from large to small alpha.

Why a path: the solution moves continuously with alpha, so each solve starts next to its
answer and stops after a fraction of a cold solve's iterations (the default objective stop
rule fires early on a warm start). Every rule below only reads the path:

``discrepancy`` (needs the noise level): Morozov's principle with a model-aware target. The
residual ||N(x_alpha) - y_delta|| is compared with tau * delta, delta the expected noise norm
(from the per-entry std, for clipped ReLU outputs by ``noise.expected_clipped_residual``),
and the largest alpha on the path below the target is refined by interpolating log alpha
linearly in the residual, then solved once more (warm) at the chosen alpha.

Why tau < 1 (``TAU``): a regularised estimate fits part of the noise. For a linear smoother
H, E||r||^2 = ||(I - H) y||^2 + std^2 (m - 2 tr H + tr H^T H), about std^2 (m - df) with df
its effective degrees of freedom, below the noise's std^2 m; so the residual of a good alpha
lies below delta and tau = 1 over-smooths (Morozov's tau >= 1 guards a worst case, not the
mean). On ``mnist-cnn-ae`` (encoder 784 -> 300, full row rank, so every noise direction can
be fitted) the residual at the best alpha of a tight grid is 0.58-0.71 delta at std 0.01,
0.72-0.83 at 0.05, 0.81-0.88 at 0.1 and 0.33 (4 training digits): df shrinks as the noise
grows. Without a cheap estimate of df(alpha) along the path, tau is one constant chosen on
TRAINING digits (``--split train``, std 0.01-0.33): the one whose worst loss against the best
alpha of the path was smallest (0.85: at most 0.7 dB; 1.0 lost up to 1.3 dB at std 0.01, 0.8
lost 1.0 dB at std 0.33, where the residual curve is flat in alpha). docs/REPRODUCTION.md
reports the result on validation digits.

``quasi-optimality`` (needs nothing): the alpha_k minimising ||x_k - x_{k+1}|| between
neighbours of the geometric path (Tikhonov & Glasko; Bauer & Reiss 2008 for its analysis):
no noise level needed, at the price of walking the whole path down to ``alpha_min``.

The module is engine-level (problems, solvers, records), so the API, the CLI, the GUI worker
and the sweeps share it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from lbi_engine.errors import InputError
from lbi_engine.solver_settings import ALPHA_RULES as RULES
from lbi_engine.solver_settings import ALPHA_START

#: Path start, floor and ceiling; the step between neighbours (four per decade). The
#: discrepancy rule walks up from the start when its first solve already fits below target.
ALPHA_MIN = 1e-4
ALPHA_MAX = 1e3
FACTOR = 10.0 ** -0.25
#: Objective tolerance of the path's solves (the chosen alpha's solve uses the run's own):
#: the rules only need the residual and the iterate to about a percent.
PATH_TOL = 1e-3
#: Factor on the expected noise norm: below 1 because a good estimate fits part of the
#: noise (module docstring); chosen on training digits.
TAU = 0.85


@dataclass
class PathPoint:
    alpha: float
    discrepancy: float
    reg: float
    objective: float
    iterations: int
    seconds: float
    psnr: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class AlphaChoice:
    """The chosen alpha, the rule that chose it, the path it was read from, and the final
    record of the solve at the chosen alpha (the run's result)."""

    alpha: float
    rule: str
    path: list[PathPoint]
    record: Any  # IterateRecord at the chosen alpha (final)
    target: float | None = None  # tau * delta for the discrepancy rule
    seconds: float = 0.0  # solver time of the whole choice, path and final solve

    def to_dict(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "alpha_rule": self.rule,
                "alpha_path": [p.to_dict() for p in self.path],
                "alpha_target": self.target, "alpha_seconds": self.seconds}


def expected_noise_norm(problem: object, std: float) -> float:
    """E||y_delta - y|| for Gaussian noise of per-entry ``std`` projected into dom Psi_L,
    from y_delta alone (sample 0): std sqrt(m) without clipping; for a ReLU-type last layer
    the clipped-noise formula (MATH.md §6) with y_delta standing in for the clean y."""
    from lbi_engine.noise import expected_clipped_residual

    y = problem.y_delta[:1]
    last = problem.network.layers[-1].activation
    lower = getattr(last, "lower", -math.inf)
    if lower == 0.0 and math.isinf(getattr(last, "upper", math.inf)):
        return float(expected_clipped_residual(y.clamp_min(0.0).double(), std)[0].sqrt())
    return std * math.sqrt(y[0].numel())


def _with_alpha(problem: object, alpha: float) -> object:
    return dataclasses.replace(problem, alpha=alpha, extras=dict(problem.extras))


def _warm(record: Any, problem: object) -> dict:
    """A record's state as the next solve's start; momentum is not carried across alphas
    (the accelerated method restarts it); the iteration count goes on."""
    from lbi_engine.solvers import warm_start

    init = warm_start(record, problem)
    for key in ("x_prev", "momentum"):
        init.pop(key, None)
    return init


def _point(alpha: float, first: Any, last: Any) -> PathPoint:
    psnr = None if last.psnr is None else float(last.psnr[0])
    return PathPoint(alpha, float(last.discrepancy[0]), float(last.reg_term[0]),
                     float(last.objective[0]), int(last.iteration - first.iteration),
                     float(last.elapsed), psnr)


_FATAL = ("cancelled", "time_budget", "diverged")


def stream_alpha(problem: object, solve: Callable[[object, dict | None, bool], Iterator[Any]], *,
                 noise_std: float | None, rule: str | None = None, tau: float = TAU,
                 start: float = ALPHA_START, alpha_min: float = ALPHA_MIN,
                 factor: float = FACTOR) -> Iterator[Any]:
    """Walks the path, applies ``rule`` (default: discrepancy with a noise level, else
    quasi-optimality) and yields every record on the way, like one solver run: only the
    last record is final, and its ``extras`` hold ``alpha``, ``alpha_rule``, ``alpha_path``
    (see :class:`AlphaChoice`). ``solve(problem, init, loose)`` runs the method and yields
    its records (``loose``: a path solve, to ``PATH_TOL``); each record's ``stage`` names the
    alpha it belongs to. Uses sample 0."""
    rule = rule or ("discrepancy" if noise_std is not None and noise_std > 0
                    else "quasi-optimality")
    if rule not in RULES:
        raise InputError(f"alpha rule {rule!r}: choose one of {', '.join(RULES)}.")
    if rule == "discrepancy" and not (noise_std is not None and noise_std > 0):
        raise InputError("the discrepancy rule needs the noise level: give --noise-level S "
                         "(the per-entry std of the measurement noise) or use quasi-optimality.")
    target = tau * expected_noise_norm(problem, noise_std) if rule == "discrepancy" else None
    path: list[PathPoint] = []
    finals: list[Any] = []
    alpha, init, step = start, None, factor
    while alpha_min * (1 - 1e-9) <= alpha <= ALPHA_MAX:
        first, last = yield from _solve_at(problem, alpha, solve, init,
                                           f"alpha path: {alpha:.3g}",
                                           sum(p.seconds for p in path))
        path.append(_point(alpha, first, last))
        finals.append(last)
        init = _warm(last, problem)
        if last.stop_reason in _FATAL:
            break
        if target is not None:
            below = path[-1].discrepancy <= target
            if len(path) == 1 and below:
                step = 1.0 / factor  # already below the target: walk up to the crossing
            elif (step < 1.0) == below:  # crossed it (going down: now below; up: above)
                break
        alpha *= step
    if target is not None and step > 1.0:  # walked up: the same order as a downward path
        order = sorted(range(len(path)), key=lambda i: -path[i].alpha)
        path, finals = [path[i] for i in order], [finals[i] for i in order]
        keep = next((i for i, p in enumerate(path) if p.discrepancy <= target), len(path) - 1)
        path, finals = path[:keep + 1], finals[:keep + 1]
    if finals[-1].stop_reason in _FATAL:
        chosen, index = path[-1].alpha, len(path) - 1
    elif rule == "discrepancy":
        chosen, index = _discrepancy_alpha(path, target)
    else:
        index = _quasi_optimal_index(finals)
        chosen = path[index].alpha
    # The result: a warm solve at the chosen alpha from the nearest larger path point (at a
    # path point it continues that point's iterate, so it only confirms convergence).
    near = index if index is not None else max(i for i, p in enumerate(path)
                                               if p.alpha >= chosen)
    choice = AlphaChoice(chosen, rule, path, None, target=target,
                         seconds=sum(p.seconds for p in path))
    previous = None
    for record in solve(_with_alpha(problem, chosen), _warm(finals[near], problem), False):
        record.elapsed += choice.seconds  # solver time of the whole run, path included
        if previous is not None:
            yield previous
        previous = record
    assert previous is not None and previous.final
    choice.seconds = float(previous.elapsed)
    choice.record = previous
    previous.extras.update(choice.to_dict())
    previous.stage = f"alpha {chosen:.3g} ({rule})"
    yield previous


def _solve_at(problem: object, alpha: float, solve: Callable[..., Iterator[Any]],
              init: dict | None, stage: str, offset: float) -> Iterator[Any]:
    """Yields one path solve's records as non-final, their solver time counted from
    ``offset`` (the path's so far); returns (first, final) records with their own time."""
    first = last = None
    for record in solve(_with_alpha(problem, alpha), init, True):
        first = record if first is None else first
        last = record
        shown = dataclasses.replace(record, final=False, stop_reasons=None, stage=stage,
                                    elapsed=record.elapsed + offset)
        yield shown
    assert first is not None and last is not None
    return first, last


def _discrepancy_alpha(path: list[PathPoint], target: float) -> tuple[float, int | None]:
    """The alpha where the residual crosses the target, by linear interpolation in
    log alpha; a path point (with its index) when the path never reached it."""
    last = path[-1]
    if last.discrepancy > target or len(path) == 1:
        return last.alpha, len(path) - 1
    prev = path[-2]
    if prev.discrepancy <= last.discrepancy:  # not monotone: take the safe side
        return last.alpha, len(path) - 1
    t = (prev.discrepancy - target) / (prev.discrepancy - last.discrepancy)
    log_alpha = math.log(prev.alpha) + t * (math.log(last.alpha) - math.log(prev.alpha))
    return float(math.exp(log_alpha)), None


def _quasi_optimal_index(finals: list[Any]) -> int:
    """argmin_k ||x_k - x_{k+1}|| (sample 0); the last point for a one-point path."""
    if len(finals) < 2:
        return len(finals) - 1
    xs = [r.x[:1].reshape(-1).to(torch.float64) for r in finals]
    steps: list[Tensor] = [torch.linalg.vector_norm(b - a)
                           for a, b in zip(xs[:-1], xs[1:], strict=True)]
    return int(torch.stack(steps).argmin())
