"""The joint method's records: the objective's parts at the current iterates.

Records on the path of alpha "auto" come every 5 steps, so their cost counts: they use the
step's maps (CSR convolutions on the CPU; the maps' own convolutions made each record cost
~10 steps), and for one sample float64 sums of the Bregman terms on the step's buffers
(``one_sample.OneSampleGradient.objective_values``), with the TV value by the compiled loop.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from lbi_engine.models.network import sum_of_terms
from lbi_engine.solvers.joint.state import FistaState


def _wide(t: Tensor) -> Tensor:
    """float32 and lower as float64 (exact); float64 as it is."""
    return t.double() if t.is_floating_point() and t.element_size() < 8 else t


def records_objective(state: FistaState) -> dict[str, Tensor]:
    """``problem.objective_parts`` at a ``JointFista``'s iterates, with the step's maps (CSR
    convolutions on the CPU): records on the path of alpha "auto" come every few steps,
    and the maps' own convolutions made each record cost ~10 steps."""
    problem, xs, maps = state.problem, state.xs, state.maps
    if state.graph_maps is not None:  # a graph network (MATH.md §5.6)
        return _graph_objective(state)
    fast = None
    if state.one is not None and state.relu_aux:
        fast = state.one.objective_values(state.slot_flat[state.slot_x], state.pre_activations)
    if fast is not None:  # one sample: float64 sums, four tensors made at the end
        sums, distance = fast
        weighted = state.alpha * float(state.tv_value(xs[0])[0])
        dtype = xs[0].dtype
        return {"bregman": torch.tensor([sums], dtype=dtype),
                "reg": torch.tensor([weighted], dtype=dtype),
                "total": torch.tensor([math.fsum(sums) + weighted], dtype=dtype),
                "discrepancy": torch.tensor([distance], dtype=dtype)}
    depth = len(state.layers)
    terms = []
    first_z = None
    for i, layer in enumerate(state.layers):
        target = xs[i + 1] if i + 1 < depth else problem.y_delta
        z = maps[i].apply(xs[i]).reshape(target.shape)
        if i == 0:
            first_z = z
        if i + 1 < depth and state.relu_aux:  # iterates clamped into dom Psi by step()
            terms.append(layer.activation.bregman_in_domain(target, z))
        else:  # in float64: a smooth kind's terms (entropies ~ log 2 each) cancel to a
            # small sum, whose float32 rounding (~sqrt(n) eps) exceeded the stop rule's
            # tolerance on 32k entries: the run could never stop by it
            terms.append(layer.activation.bregman(_wide(target), _wide(z)).to(z.dtype))
    bregman = torch.stack(terms, dim=1)
    reg = state.alpha * state.tv_value(xs[0])
    # the forward pass of x_0 starts with the W_1 x_0 + b_1 of the first Bregman term
    assert first_z is not None  # depth >= 1
    out = state.layers[0].activation.sigma(first_z)
    for i in range(1, depth):
        out = state.layers[i].activation.sigma(maps[i].apply(out))
    batch = out.shape[0]
    discrepancy = (out.reshape(problem.y_delta.shape) - problem.y_delta) \
        .reshape(batch, -1).norm(dim=1)
    return {"bregman": bregman, "reg": reg, "total": bregman.sum(dim=1) + reg,
            "discrepancy": discrepancy}


def _graph_objective(state: FistaState) -> dict[str, Tensor]:
    """records_objective on a graph network: the pre-activations with the step's maps, the
    hidden terms without the domain checks where every auxiliary block is a ReLU's (the
    step clamps them into dom Psi), and the forward pass of x_0 for the discrepancy, whose
    first layer reads x_0 alone and so starts from that layer's lifted pre-activation. On a
    128x128 resnet18 slice (2.5M lifted values) ``problem.objective_parts`` cost about a
    step, and records come every few steps on the alpha path."""
    problem, xs, graph = state.problem, state.xs, state.graph_maps
    assert graph is not None  # records_objective calls this for a graph network only
    depth = len(state.layers)
    terms: list[Tensor] = []
    first_z: Tensor | None = None
    for i, (layer, maps) in enumerate(zip(state.layers, graph, strict=True)):
        z = sum_of_terms(maps, xs)
        first_z = z if i == 0 else first_z
        target = (xs[i + 1] if i + 1 < depth else problem.y_delta).reshape(z.shape)
        if i + 1 < depth and state.relu_aux:
            terms.append(layer.activation.bregman_in_domain(target, z))
        else:  # in float64, as the chain's (see records_objective)
            terms.append(layer.activation.bregman(_wide(target), _wide(z)).to(z.dtype))
    bregman = torch.stack(terms, dim=1)
    reg = state.alpha * state.tv_value(xs[0])
    assert first_z is not None  # depth >= 1
    states = [xs[0], state.layers[0].activation.sigma(first_z)]
    for i in range(1, depth):
        states.append(state.layers[i].activation.sigma(sum_of_terms(graph[i],
                                                                      states)))
    batch = states[-1].shape[0]
    discrepancy = (states[-1].reshape(problem.y_delta.shape) - problem.y_delta) \
        .reshape(batch, -1).norm(dim=1)
    return {"bregman": bregman, "reg": reg, "total": bregman.sum(dim=1) + reg,
            "discrepancy": discrepancy}

