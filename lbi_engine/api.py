"""One facade for every caller (CLI, GUI, scripts): a plain request in, records out.

``InversionRequest`` is the run record: JSON-serialisable, versioned, and enough to repeat a
run with ``lbi invert --record FILE``. ``prepare`` turns it into an ``InversionProblem``
(loading the network, the sample and the noise); ``iterate`` streams the solver's records.
``solve`` is the script's call: a request or a problem in, a typed :class:`SolveResult` out.
The pieces live beside it: ``_api_prepared`` (PreparedRun and its display arrays),
``_api_inputs`` (the truth and feature prior a request names, checked before lifting),
``_api_warm_up`` (a run's one-time work) and ``_api_metrics`` (``final_metrics``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lbi_engine._api_inputs import _as_network_input, _feature_priors, _load_truth
from lbi_engine._api_metrics import final_metrics
from lbi_engine._api_prepared import PreparedRun, _squeeze_display, tile_feature_maps
from lbi_engine._api_warm_up import _warm_up
from lbi_engine.errors import InputError, ShapeMismatchError
from lbi_engine.problem import InversionProblem
from lbi_engine.protocols import Problem
from lbi_engine.request import DTYPES, FORMAT_VERSION, InversionRequest
from lbi_engine.settings.solver import StopRule
from lbi_engine.solvers import solve as solve_records
from lbi_engine.solvers import warm_start
from lbi_engine.solvers.alpha import PATH_REPORT, stream_alpha
from lbi_engine.solvers.base import CancelToken, IterateRecord

__all__ = [
    "DTYPES",
    "FORMAT_VERSION",
    "InversionRequest",
    "PreparedRun",
    "SolveResult",
    "final_metrics",
    "iterate",
    "prepare",
    "run_to_end",
    "solve",
    "tile_feature_maps",
]


def prepare(request: InversionRequest, bundle: Any = None) -> PreparedRun:
    """Loads what the request names and builds the inversion problem.

    Pass ``bundle`` (a loaded ModelBundle for the same network) to skip reloading it.
    """
    from lbi_engine import data as data_mod
    from lbi_engine import metrics, noise
    from lbi_engine.models.declared import declared_input_shape
    from lbi_engine.models.zoo import load_network

    request.validate()
    device, dtype = torch.device(request.resolved_device()), DTYPES[request.dtype]
    # The data is read and checked against the shape the network declares before the network
    # is lifted (seconds to a minute for a large one): a mismatch is refused at once.
    declared = tuple(bundle.input_shape) if bundle is not None else declared_input_shape(
        request.network, request.input_shape)
    if declared is None and bundle is None:  # the file does not say: lift first
        bundle = load_network(
            request.network, input_shape=request.input_shape, allow_code=request.allow_code
        )
        declared = tuple(bundle.input_shape)
    assert declared is not None
    truth_display = _load_truth(request, declared)
    source = request.truth or request.image or f"{request.dataset} sample {request.index}"
    if truth_display is not None:
        _as_network_input(truth_display, declared, source)
    if bundle is None:
        bundle = load_network(
            request.network, input_shape=request.input_shape, allow_code=request.allow_code
        )
    encoder = _warm_up(bundle.encoder, request.method, device, dtype)
    input_shape = tuple(encoder.input_shape)
    from lbi_engine.priors.input import run_regulariser

    regulariser, regulariser_rule = run_regulariser(
        request.regulariser, request.network, getattr(bundle, "sha256", None), input_shape,
        request.input_prior, request.noise_std_known())
    x_true = y_clean = None
    delta = delta_sq = noise_norm = None
    if truth_display is not None:
        shaped = _as_network_input(truth_display, input_shape, source)
        x_net = bundle.preprocessing.apply(shaped)
        x_true = torch.as_tensor(np.asarray(x_net), dtype=dtype, device=device)
        noisy = noise.make_noisy_data(encoder, x_true, request.noise_std, seed=request.seed)
        y_delta, y_clean = noisy.y_delta, noisy.y
        delta = float(noisy.delta[0])
        delta_sq = float(noisy.delta_squared[0])
        noise_norm = float(noisy.noise_norm[0])
    else:
        assert request.data is not None  # _load_truth gives None only for measured data
        measured = np.asarray(data_mod.read_array(request.data), dtype=np.float32)
        out_shape = tuple(encoder.output_shape)
        if measured.size != math.prod(out_shape):
            raise ShapeMismatchError(
                f"{request.data} has shape {measured.shape} but the network's output is "
                f"{out_shape}; give one measured code of that shape."
            )
        y_delta = torch.as_tensor(measured.reshape(1, *out_shape), dtype=dtype, device=device)
        last = encoder.layers[-1].activation
        if not bool(last.in_domain(y_delta, atol=1e-6).all()):
            import warnings

            warnings.warn(
                f"{request.data}: values outside the domain of the last activation were "
                "clipped into it (as the paper does for ReLU).",
                stacklevel=2,
            )
        y_delta = last.project(y_delta)
    preprocessing = bundle.preprocessing
    problem = InversionProblem(
        network=encoder,
        y_delta=y_delta,
        regulariser=regulariser,
        alpha=request.fixed_alpha(),
        x_true=x_true,
        data_range=float(getattr(preprocessing, "data_range", 1.0)),
        display_offset=float(getattr(preprocessing, "display_offset", 0.0)),
        delta=None
        if noise_norm is None
        else torch.tensor([noise_norm], device=device, dtype=dtype),
        layer_alphas=request.layer_alphas,
        feature_priors=_feature_priors(request, bundle, encoder),
        extras={"regulariser_rule": regulariser_rule,
                "regulariser_run": regulariser.describe()},
    )
    if request.method == "layerwise":  # refused here, before anything runs
        from lbi_engine.solvers.layerwise import check_ready

        check_ready(problem)
    decoder_image = decoder_psnr = None
    if getattr(bundle, "decoder", None) is not None:
        decoded = bundle.decode(y_delta.to("cpu", torch.float32))
        decoder_image = _squeeze_display(np.asarray(decoded, dtype=np.float32))
        if truth_display is not None:
            reference = torch.as_tensor(truth_display.reshape(decoder_image.shape))
            decoder_psnr = float(
                metrics.psnr(torch.as_tensor(decoder_image)[None], reference[None], data_range=1.0)[
                    0
                ]
            )
    truth_image = None
    if truth_display is not None:
        image_shape = problem.image_shape or input_shape
        truth_image = _squeeze_display(truth_display.reshape(image_shape))
    return PreparedRun(
        request,
        bundle,
        problem,
        truth_image,
        decoder_image,
        decoder_psnr,
        delta,
        delta_sq,
        noise_norm,
        y_clean,
    )



def iterate(
    prepared: PreparedRun,
    *,
    cancel: CancelToken | None = None,
    warm_start_from: IterateRecord | dict | None = None,
    alpha: float | None = None,
) -> Iterator[IterateRecord]:
    """Streams the records of the request's method on the prepared problem.

    ``warm_start_from``: a previous record (or its ``to_numpy()``) to continue from — the
    iteration count continues; ``alpha`` overrides the request's weight (hot change).
    """
    request = prepared.request
    problem = prepared.problem
    if alpha is not None and alpha != problem.alpha:
        # replace() runs __post_init__ again (checks alpha, rebuilds reg); **__dict__ would
        # also pass the derived attribute `reg`, which __init__ does not take (TypeError)
        problem = dataclasses.replace(problem, alpha=alpha, extras=dict(problem.extras))
    if request.threads:
        torch.set_num_threads(int(request.threads))
    init = warm_start(warm_start_from, problem) if warm_start_from is not None else None

    def run(p: Problem, start: dict | None,
            path_tol: float | None = None) -> Iterator[IterateRecord]:
        stop, every = request.stop_rule(), request.report_every
        if path_tol is not None:  # a path solve of alpha "auto" (alpha.PathSolve)
            every = min(every, PATH_REPORT)
            if path_tol == 0.0:  # the search ends it once it has settled
                stop = dataclasses.replace(stop, tol=0.0)
            elif stop.tol_mode == "objective":
                stop = dataclasses.replace(stop, tol=max(stop.tol, path_tol))
        return solve_records(p, request.method, stop=stop,
                             options=request.solver_options(), init=start, cancel=cancel,
                             report_every=every)

    # Layer-wise chooses its input stage's alpha itself when the noise level is known
    # (SolverOptions.input_alpha, quasi-optimality or discrepancy): no outer path then.
    # A one-layer network has no stages: layer-wise is the one-layer method there, and its
    # alpha "auto" is chosen on the outer path as for that method.
    delegated = request.method == "layerwise" and problem.depth > 1 \
        and request.noise_std_known() is not None \
        and request.solver_options().input_alpha != "given"
    problem = _hidden_weight_auto(problem, request, warm_start_from)
    if request.alpha == "auto" and alpha is None and request.method != "landweber" \
            and not delegated:

        rule = None if request.alpha_rule == "auto" else request.alpha_rule
        if rule is None and _starts_by_continuation(problem, request):
            from lbi_engine.solvers.alpha.continuation import stream_continuation

            return stream_continuation(problem, run, noise_std=request.noise_std_known(),
                                       cancel=cancel, time_budget=request.time_budget,
                                       max_iter=request.max_iter)
        return stream_alpha(problem, run, noise_std=request.noise_std_known(), rule=rule)
    return run(problem, init)


def _starts_by_continuation(problem: InversionProblem, request: InversionRequest) -> bool:
    """Whether alpha "auto" runs the exact problem's continuation path and then the lifted
    solve (SolverOptions.start; "auto": a joint run with TV on a network from a file)."""
    from lbi_engine.models.zoo import list_zoo
    from lbi_engine.solvers import resolve_method
    from lbi_engine.solvers.alpha.continuation import applies

    start = request.solver_options().start
    if start == "back-projection" or resolve_method(request.method, problem) != "joint" \
            or not applies(problem):
        return False
    return start == "continuation" or request.network not in list_zoo()


def _hidden_weight_auto(problem: InversionProblem, request: InversionRequest,
                        warm_start_from: IterateRecord | dict | None) -> InversionProblem:
    """The problem marked for the joint method's hidden weight "auto" (MATH.md §5.7): on a
    network with a hidden state that scales the alpha search may raise it (``AUTO_WEIGHT``
    = 1 in extras); a warm restart keeps the weight its record ran with, so that changing
    alpha or the noise while a run goes on does not change the objective under it."""
    from lbi_engine.models.rescale import AUTO_WEIGHT
    from lbi_engine.solvers import resolve_method
    from lbi_engine.solvers._hidden_weight import may_raise

    if request.solver_options().hidden_weight != "auto" or \
            resolve_method(request.method, problem) != "joint":
        return problem
    extras = warm_start_from.extras if isinstance(warm_start_from, IterateRecord) else \
        (warm_start_from or {}).get("extras") or {}
    if "hidden_weight" in extras:
        weight = float(extras["hidden_weight"])
    elif may_raise(problem.network):
        weight = 1.0
    else:
        return problem
    return dataclasses.replace(problem, extras={**problem.extras, AUTO_WEIGHT: weight})




def run_to_end(
    request: InversionRequest, bundle: Any = None, cancel: CancelToken | None = None
) -> tuple[PreparedRun, IterateRecord, list[IterateRecord]]:
    """Prepares and runs a request; returns (prepared, final record, all records)."""
    prepared = prepare(request, bundle)
    records = [rec for rec in iterate(prepared, cancel=cancel)]
    return prepared, records[-1], records


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
        metrics: every number ``result.json`` holds under ``metrics``.
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
    # every number result.json holds (:func:`final_metrics`). Left out of the repr: long.
    history: list[IterateRecord] = field(repr=False)
    prepared: PreparedRun = field(repr=False)
    metrics: dict[str, Any] = field(repr=False)


def solve(
    problem_or_request: InversionProblem | InversionRequest,
    alpha: float | str | None = None,
    *,
    method: str | None = None,
    alpha_rule: str | None = None,
    noise_level: float | None = None,
    stop: StopRule | None = None,
    options: dict[str, Any] | None = None,
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
        prepared = PreparedRun(request, None, problem, None, None, None, None, None, None)
    else:
        raise InputError(f"solve: got a {type(problem_or_request).__name__}; give an "
                         "InversionRequest (lbi_engine.InversionRequest) or an "
                         "InversionProblem (lbi_engine.InversionProblem).")
    history = list(iterate(prepared, cancel=cancel))
    final = history[-1]
    m = final_metrics(prepared, final, sample)
    return SolveResult(
        x=final.x, alpha=m["alpha"], alpha_rule=m["alpha_rule"], method_run=m["method_run"],
        stop_rule=m["stop_rule"], stop_reason=m["stop_reason"], iterations=m["iterations"],
        seconds=m["seconds"], psnr=m["psnr"], ssim=m["ssim"], decoder_psnr=m["decoder_psnr"],
        history=history, prepared=prepared, metrics=m)
