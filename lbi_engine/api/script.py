"""``solve``, the script's call: a request or a problem you built in, a typed
:class:`SolveResult` out, by the same path as ``lbi invert``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

from lbi_engine.api.loading import prepare
from lbi_engine.api.prepared import PreparedRun, final_metrics, method_for
from lbi_engine.api.running import iterate
from lbi_engine.errors import InputError
from lbi_engine.problem import InversionProblem
from lbi_engine.request import InversionRequest
from lbi_engine.results.run_metrics import RunMetrics
from lbi_engine.settings.solver import OptionValue, StopRule
from lbi_engine.solvers.base import CancelToken, IterateRecord


@dataclass(frozen=True)
class SolveResult:
    """What :func:`solve` returns. The numbers are one sample's (``sample``, default 0; the
    alpha search also decides on sample 0); ``x`` and ``history`` hold every sample.

    Attributes:
        x: the final iterate, ``(B, *input_shape)``, in the network's input space.
        alpha: the weight the final solve used (the chosen one for ``alpha="auto"``).
        alpha_rule: ``"fixed"``, ``"discrepancy"``, ``"quasi-optimality"`` or
            ``"noise-scaled"`` (the learned prior's alpha from the noise level).
        method_run: the method that ran (what ``"auto"`` resolved to).
        stop_rule: what a ``"tolerance"`` stop measured, in words.
        stop_reason: why the run ended: ``"tolerance"``, ``"max_iterations"``,
            ``"time_budget"``, ``"cancelled"``, ...
        iterations: iterations of the final solve.
        seconds: solver time, the alpha search's solves included.
        psnr: PSNR (dB) against the ground truth; None without one.
        ssim: SSIM against the ground truth; None without one.
        decoder_psnr: PSNR of the network's decoder applied to the same noisy code, for
            autoencoders of the zoo; None otherwise.
        history: every reported :class:`~lbi_engine.solvers.base.IterateRecord`, the final
            one last.
        prepared: the request, problem and references the run used.
        metrics: every number of the run (:class:`RunMetrics`: what ``result.json`` holds
            under ``metrics``).
    """

    x: Tensor = field(repr=False)  # (B, *input_shape): the final iterate, network input space
    alpha: float  # the weight the final solve used (the chosen one for alpha "auto")
    alpha_rule: str  # "fixed", "discrepancy" or "quasi-optimality"
    method_run: str  # what "auto" resolved to: "one-layer", "joint", ...
    stop_rule: str  # what a "tolerance" stop measured, in words
    stop_reason: str | None  # "tolerance", "max_iterations", "time_budget", "cancelled", ...
    iterations: int
    seconds: float  # solver time (the alpha search's solves included)
    psnr: float | None  # None without a ground truth
    ssim: float | None
    decoder_psnr: float | None  # the network's decoder on the same code, when it has one
    # every record, the final one last; the request, problem and references the run used;
    # every number of the run (result.json's metrics). Left out of the repr: long.
    history: list[IterateRecord] = field(repr=False)
    prepared: PreparedRun = field(repr=False)
    metrics: RunMetrics = field(repr=False)


def solve(
    problem_or_request: InversionProblem | InversionRequest,
    alpha: float | str | None = None,
    *,
    method: str | None = None,
    alpha_rule: str | None = None,
    noise_level: float | None = None,
    stop: StopRule | None = None,
    options: dict[str, OptionValue] | None = None,
    report_every: int | None = None,
    cancel: CancelToken | None = None,
    bundle: Any = None,
    sample: int = 0,
) -> SolveResult:
    """Runs a request (network, sample, noise: loaded by :func:`prepare`) or a problem you
    built yourself to the end, by the same path as ``lbi invert``.

    ``alpha``: a number, ``"auto"`` (chosen by ``alpha_rule``: the discrepancy principle when
    the noise level is known, else quasi-optimality), or None for the request's or problem's
    own. ``noise_level``: the per-entry std of the measurement noise (a request with
    simulated noise knows it). ``method``, ``alpha_rule``, ``stop``, ``options`` and
    ``report_every`` override the request's settings; for a problem they default to a
    request's defaults (method "auto", the default stop rule). ``bundle``: a loaded network
    for the request's ``network``, to skip loading it again.
    """
    settings: dict[str, Any] = {
        key: value for key, value in (("method", method), ("alpha_rule", alpha_rule),
                                      ("noise_level", noise_level),
                                      ("report_every", report_every)) if value is not None}
    if stop is not None:
        settings.update(max_iter=stop.max_iter, tol=stop.tol, tol_mode=stop.tol_mode,
                        time_budget=stop.time_budget)
    if isinstance(problem_or_request, InversionRequest):
        request = problem_or_request
        if options is not None:
            settings["options"] = {**request.options, **options}
        if alpha is not None:
            settings["alpha"] = alpha
        prepared = prepare(dataclasses.replace(request, **settings), bundle)
    elif isinstance(problem_or_request, InversionProblem):
        problem = problem_or_request
        # The request carries only the solver's settings here: the problem is already built
        # (noise_std 0: nothing is simulated, so the noise level is what the caller states).
        request = InversionRequest(alpha=float(problem.alpha) if alpha is None else alpha,
                                   noise_std=0.0, options=dict(options or {}), **settings)
        request.validate(check_device=False)
        fixed = float(alpha) if alpha not in (None, "auto") else None
        if fixed is not None and fixed != problem.alpha:
            problem = dataclasses.replace(problem, alpha=fixed, extras=dict(problem.extras))
        prepared = PreparedRun(request=request, problem=problem,
                               method=method_for(request.method, problem))
    else:
        raise InputError(f"solve: got a {type(problem_or_request).__name__}; give an "
                         "InversionRequest (lbi_engine.InversionRequest) or an "
                         "InversionProblem (lbi_engine.InversionProblem).")
    history = list(iterate(prepared, cancel=cancel))
    final = history[-1]
    m = final_metrics(prepared, final, sample)
    assert m.alpha is not None  # a run's metrics always hold the alpha it used
    return SolveResult(
        x=final.x, alpha=m.alpha, alpha_rule=m.alpha_rule, method_run=m.method_run,
        stop_rule=m.stop_rule, stop_reason=m.stop_reason, iterations=m.iterations,
        seconds=m.seconds, psnr=m.psnr, ssim=m.ssim, decoder_psnr=m.decoder_psnr,
        history=history, prepared=prepared, metrics=m)
