"""Inversion methods behind one streaming protocol (see ``base.py``).

>>> for record in solve(problem, "joint", stop=StopRule(max_iter=500)):
...     print(record.iteration, record.objective)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from torch import Tensor

from lbi_engine.errors import InputError
from lbi_engine.protocols import Problem
from lbi_engine.settings.solver import DESCRIPTIONS, SolverOptions
from lbi_engine.solvers.backprop import run_backprop
from lbi_engine.solvers.base import CancelToken, IterateRecord, StopReason, StopRule, final
from lbi_engine.solvers.joint.method import run_joint
from lbi_engine.solvers.landweber import run_landweber
from lbi_engine.solvers.layerwise import run_layerwise
from lbi_engine.solvers.one_layer.method import run_pdhg

if TYPE_CHECKING:
    import numpy as np


def run_one_layer(problem: Problem, stop: StopRule, options: SolverOptions,
                  init: dict[str, Any] | None, cancel: CancelToken | None,
                  report_every: int) -> Iterator[IterateRecord]:
    """Method ``one-layer`` (alias ``pdhg``): the one-layer problem by the fastest exact
    solver that applies (accelerated proximal gradient for TV, else Condat–Vũ PDHG; see
    SolverOptions.steps). The old name ``pdhg`` misled: by default it runs FISTA."""
    for record in run_pdhg(problem, stop, options, init, cancel, report_every):
        record.method = "one-layer"
        yield record


def resolve_method(method: str, problem: Problem) -> str:
    """The method a request runs: ``auto`` is ``one-layer`` for one lifted layer (the
    accelerated solver) and ``joint`` for several; ``pdhg`` is an alias of ``one-layer``."""
    if method == "auto":
        graph = not getattr(problem.network, "is_chain", True)
        return "one-layer" if problem.depth == 1 and not graph else "joint"
    return "one-layer" if method == "pdhg" else method


def run_auto(problem: Problem, *args: Any) -> Iterator[IterateRecord]:
    """Method ``auto``: see :func:`resolve_method`; records name the method that ran."""
    return METHODS[resolve_method("auto", problem)](problem, *args)


METHODS: dict[str, Callable[..., Iterator[IterateRecord]]] = {
    "auto": run_auto,
    "one-layer": run_one_layer,
    "pdhg": run_one_layer,
    "joint": run_joint,
    "layerwise": run_layerwise,
    "landweber": run_landweber,
    "backprop": run_backprop,
}

def solve(
    problem: Problem,
    method: str = "auto",
    *,
    stop: StopRule | None = None,
    options: SolverOptions | dict[str, Any] | None = None,
    init: dict[str, Any] | None = None,
    cancel: CancelToken | None = None,
    report_every: int = 10,
) -> Iterator[IterateRecord]:
    """Runs ``method`` on ``problem`` and yields :class:`IterateRecord` objects.

    ``init`` warm-starts from a previous state: ``{"x": ..., "aux": [...], "dual": ...,
    "iteration": k}`` (tensors on the problem's device), e.g. from :func:`warm_start`.
    """
    if method not in METHODS:
        raise InputError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}.")
    if not isinstance(options, SolverOptions):
        options = SolverOptions.from_dict(options)
    if report_every < 1:
        raise InputError(f"report_every={report_every}: must be at least 1.")
    resolved = resolve_method(method, problem)
    if not getattr(problem.network, "is_chain", True) and \
            resolved not in ("joint", "layerwise", "backprop"):
        from lbi_engine.solvers.joint.method import graph_refusal

        raise InputError(graph_refusal(f"method {method!r}"))
    rule, opts = stop or StopRule(), options
    if resolved == "joint":  # with the hidden-layer weight (MATH.md §5.7)
        from lbi_engine.solvers.joint.hidden_weight import run_weighted

        return run_weighted(problem, opts, init, lambda p, start: run_joint(
            p, rule, opts, start, cancel, report_every))
    return METHODS[method](problem, rule, opts, init, cancel, report_every)


def warm_start(record: IterateRecord | dict[str, Any], problem: Problem) -> dict[str, Any]:
    """The state of a record (or its ``to_numpy()`` dict) as ``init`` for a new run."""
    import numpy as np
    import torch

    def tensor(value: Tensor | np.ndarray | None) -> Tensor | None:
        if value is None:
            return None
        if isinstance(value, np.ndarray):
            value = torch.from_numpy(value)
        return value.to(device=problem.device, dtype=problem.dtype)

    data = record.to_numpy() if isinstance(record, IterateRecord) else record
    warm = data.get("warm") or {}
    init: dict[str, Any] = {"x": tensor(data["x"]), "iteration": int(data["iteration"])}
    aux = [tensor(a) for a in data.get("aux") or []]
    if aux and len(aux) == problem.depth - 1:
        init["aux"] = aux
    for key in ("dual", "x_prev", "momentum"):  # "x_prev", "momentum": accelerated methods
        if warm.get(key) is not None:
            init[key] = tensor(warm[key])
    return init


__all__ = [
    "DESCRIPTIONS",
    "METHODS",
    "CancelToken",
    "IterateRecord",
    "SolverOptions",
    "StopReason",
    "StopRule",
    "final",
    "resolve_method",
    "solve",
    "warm_start",
]
