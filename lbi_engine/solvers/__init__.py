"""Inversion methods behind one streaming protocol (see ``base.py``).

>>> for record in solve(problem, "joint", stop=StopRule(max_iter=500)):
...     print(record.iteration, record.objective)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from lbi_engine.errors import InputError
from lbi_engine.solvers.backprop import run_backprop
from lbi_engine.solvers.base import CancelToken, IterateRecord, StopReason, StopRule
from lbi_engine.solvers.joint import run_joint
from lbi_engine.solvers.landweber import run_landweber
from lbi_engine.solvers.layerwise import run_layerwise
from lbi_engine.solvers.options import SolverOptions
from lbi_engine.solvers.pdhg import run_pdhg

METHODS: dict[str, Callable[..., Iterator[IterateRecord]]] = {
    "pdhg": run_pdhg,
    "joint": run_joint,
    "layerwise": run_layerwise,
    "landweber": run_landweber,
    "backprop": run_backprop,
}

DESCRIPTIONS = {
    "pdhg": "PDHG on a one-layer network (paper eq. 12)",
    "joint": "all layers jointly by coordinate descent (paper eqs. 13-15)",
    "layerwise": "layer by layer from the output down (paper's remark)",
    "landweber": "Landweber with the discrepancy principle (baseline)",
    "backprop": "gradient descent through the network with autograd (baseline)",
}


def solve(
    problem: object,
    method: str = "joint",
    *,
    stop: StopRule | None = None,
    options: SolverOptions | dict | None = None,
    init: dict | None = None,
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
    return METHODS[method](problem, stop or StopRule(), options, init, cancel, report_every)


def warm_start(record: IterateRecord | dict, problem: object) -> dict:
    """The state of a record (or its ``to_numpy()`` dict) as ``init`` for a new run."""
    import numpy as np
    import torch

    def tensor(value: object) -> object:
        if value is None:
            return None
        if isinstance(value, np.ndarray):
            value = torch.from_numpy(value)
        return value.to(device=problem.device, dtype=problem.dtype)

    data = record.to_numpy() if isinstance(record, IterateRecord) else record
    extras = data.get("extras") or {}
    init = {"x": tensor(data["x"]), "iteration": int(data["iteration"])}
    aux = [tensor(a) for a in data.get("aux") or []]
    if aux and len(aux) == problem.depth - 1:
        init["aux"] = aux
    for key in ("dual", "x_prev", "momentum"):  # "x_prev", "momentum": accelerated pdhg
        if extras.get(key) is not None:
            init[key] = tensor(extras[key])
    return init


def final(records: Iterator[IterateRecord]) -> IterateRecord:
    """Consumes a run and returns its final record."""
    last = None
    for record in records:
        last = record
    assert last is not None and last.final
    return last


__all__ = [
    "DESCRIPTIONS",
    "METHODS",
    "CancelToken",
    "IterateRecord",
    "SolverOptions",
    "StopReason",
    "StopRule",
    "final",
    "solve",
    "warm_start",
]
