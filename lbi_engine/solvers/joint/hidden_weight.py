"""The joint method with the hidden-layer weight (MATH.md §5.7; lbi_engine/models/rescale.py).

The weighted objective sum_l w_l B_l + alpha R is the paper's objective on a rescaled network
(hidden state l times sqrt(w_l)). This room runs the joint method there and translates at
the border, so that callers only ever see the network's own states: a warm start's auxiliary
variables (and the accelerated method's previous iterate) are multiplied by the scales on
the way in, every record's are divided by them on the way out. A record's objective and
Bregman terms are the weighted ones, which the method minimises; ``hidden_weight``
says which weight ran.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor

from lbi_engine.models.rescale import rescaled, resolve_hidden_weight, state_scales
from lbi_engine.protocols import Problem
from lbi_engine.settings.solver import SolverOptions
from lbi_engine.solvers.base import IterateRecord

Run = Callable[[Problem, dict[str, Any] | None], Iterator[IterateRecord]]


def hidden_weight_of(problem: Problem, options: SolverOptions) -> float:
    """The weight ``options.hidden_weight`` stands for on this problem ("auto": 1, or what
    the alpha search raised it to, ``problem.extras``)."""
    return resolve_hidden_weight(options.hidden_weight, problem.extras)


def may_raise(network: Any) -> bool:
    """Whether hidden weight "auto" may be raised on this network (MATH.md §5.7): it has a
    hidden state whose activation scales, chain or graph. The relaxation measures the
    residual in the (I + M/w)^-1 norm, M from the hidden states' gains to the output, which
    a chain's amplifying layers make large as a graph's extra paths do; the alpha search
    raises the weight only where the data show it (a target out of reach at weight 1)."""
    scales = state_scales(network, 4.0)
    return any(c != 1.0 for c in scales[1:-1])


def _scale_flat(flat: Tensor, sizes: list[int], scales: list[float], up: bool) -> Tensor:
    """(B, n_0 + n_1 + ..) blocks [x_0, x_1, ..] times (or divided by) their scales."""
    parts = list(flat.reshape(flat.shape[0], -1).split(sizes, dim=1))
    for k, part in enumerate(parts):
        if scales[k] != 1.0:
            parts[k] = part * scales[k] if up else part / scales[k]
    return torch.cat(parts, dim=1).reshape(flat.shape)


def _scale_flat_(flat: Tensor, sizes: list[int], scales: list[float]) -> None:
    """(B, n_0 + n_1 + ..) blocks [x_0, x_1, ..] divided by their scales, in place."""
    for part, scale in zip(flat.reshape(flat.shape[0], -1).split(sizes, dim=1), scales,
                           strict=True):
        if scale != 1.0:
            part.div_(scale)


def run_weighted(problem: Problem, options: SolverOptions, init: dict[str, Any] | None,
                 run: Run) -> Iterator[IterateRecord]:
    """``run(problem, init)`` on the rescaled network, in the network's own variables."""
    weight = hidden_weight_of(problem, options)
    if weight == 1.0:
        for record in run(problem, init):
            record.hidden_weight = weight
            yield record
        return
    network = problem.network
    scales = state_scales(network, weight)  # type: ignore[arg-type]
    hidden = scales[1:-1]  # x_1 .. x_{L-1}
    sizes = _block_sizes(problem)
    inner = dataclasses.replace(problem, network=rescaled(network, weight),  # type: ignore[arg-type]
                                extras=dict(problem.extras))
    if init is not None:
        init = dict(init)
        if init.get("aux"):
            init["aux"] = [a * c for a, c in zip(init["aux"], hidden, strict=True)]
        if init.get("x_prev") is not None:
            init["x_prev"] = _scale_flat(init["x_prev"], sizes, scales[:-1], up=True)
    for record in run(inner, init):
        # in place: a record's states are its own copies (RunMonitor.record)
        for a, c in zip(record.aux, hidden, strict=True):
            if c != 1.0:
                a.div_(c)
        prev = None if record.warm is None else record.warm.x_prev
        if prev is not None:
            _scale_flat_(prev, sizes, scales[:-1])
        record.hidden_weight = weight
        yield record


def _block_sizes(problem: Problem) -> list[int]:
    """Entries per sample of x_0, x_1, .., x_{L-1}."""
    network = problem.network
    shapes = [tuple(problem.input_shape)] + [tuple(layer.affine.out_shape)
                                             for layer in network.layers[:-1]]
    return [math.prod(s) for s in shapes]
