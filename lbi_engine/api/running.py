"""Running a prepared request: ``iterate`` streams the records of its method (through the
alpha search for alpha "auto"), ``run_to_end`` prepares and runs a request to its end."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import torch

from lbi_engine.api.loading import prepare
from lbi_engine.api.prepared import PreparedRun
from lbi_engine.problem import InversionProblem
from lbi_engine.protocols import Problem
from lbi_engine.request import InversionRequest
from lbi_engine.settings.solver import SolverOptions
from lbi_engine.solvers import solve as solve_records
from lbi_engine.solvers import warm_start
from lbi_engine.solvers.alpha import PATH_REPORT, stream_alpha
from lbi_engine.solvers.alpha.continuation import applies, stream_continuation
from lbi_engine.solvers.base import CancelToken, IterateRecord


def iterate(
    prepared: PreparedRun,
    *,
    cancel: CancelToken | None = None,
    warm_start_from: IterateRecord | dict | None = None,
    alpha: float | None = None,
) -> Iterator[IterateRecord]:
    """Streams the records of the prepared method on the prepared problem.

    ``warm_start_from``: a previous record (or its ``to_numpy()``) to continue from — the
    iteration count continues; ``alpha`` overrides the request's weight (hot change).
    """
    request, problem, method = prepared.request, prepared.problem, prepared.method
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
        return solve_records(p, method, stop=stop,
                             options=request.solver_options(), init=start, cancel=cancel,
                             report_every=every)

    # Layer-wise chooses its input stage's alpha itself when the noise level is known
    # (SolverOptions.input_alpha, quasi-optimality or discrepancy): no outer path then.
    # A one-layer network has no stages: layer-wise is the one-layer method there, and its
    # alpha "auto" is chosen on the outer path as for that method.
    delegated = method == "layerwise" and problem.depth > 1 \
        and request.noise_std_known() is not None \
        and request.solver_options().input_alpha != "given"
    problem = hidden_weight_auto(problem, method, request.solver_options(), warm_start_from)
    if request.alpha == "auto" and alpha is None and method != "landweber" \
            and not delegated:

        rule = None if request.alpha_rule == "auto" else request.alpha_rule
        if rule is None and starts_by_continuation(problem, request, method):
            return stream_continuation(problem, run, noise_std=request.noise_std_known(),
                                       cancel=cancel, time_budget=request.time_budget,
                                       max_iter=request.max_iter)
        return stream_alpha(problem, run, noise_std=request.noise_std_known(), rule=rule)
    return run(problem, init)


def starts_by_continuation(problem: Problem, request: InversionRequest, method: str) -> bool:
    """Whether alpha "auto" runs the exact problem's continuation path and then the lifted
    solve (SolverOptions.start; "auto": a joint run with TV on a network from a file, MATH.md
    §5.8). ``method``: the resolved method."""
    from lbi_engine.models.zoo import list_zoo

    start = request.solver_options().start
    if start == "back-projection" or method != "joint" or not applies(problem):
        return False
    return start == "continuation" or request.network not in list_zoo()


def hidden_weight_auto(problem: InversionProblem, method: str, options: SolverOptions,
                       warm_start_from: IterateRecord | dict | None) -> InversionProblem:
    """The problem marked for the joint method's hidden weight "auto" (MATH.md §5.7): on a
    network with a hidden state that scales the alpha search may raise it (``AUTO_WEIGHT``
    = 1 in extras); a warm restart keeps the weight its record ran with, so that changing
    alpha or the noise while a run goes on does not change the objective under it.
    ``method``: the resolved method (:attr:`PreparedRun.method`)."""
    from lbi_engine.models.rescale import AUTO_WEIGHT
    from lbi_engine.solvers.joint.hidden_weight import may_raise

    if options.hidden_weight != "auto" or method != "joint":
        return problem
    ran_with = warm_start_from.hidden_weight if isinstance(warm_start_from, IterateRecord) \
        else (warm_start_from or {}).get("hidden_weight")
    if ran_with is not None:
        weight = float(ran_with)
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
