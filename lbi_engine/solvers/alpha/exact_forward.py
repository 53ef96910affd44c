"""The network's forward map N(x) for the continuation path (MATH.md §5.8), at the lowest cost.

The path solves the exact problem, so it needs N(x) and its gradient, not the lifted
layers. Where lbi translated a file's graph into a module before lifting it
(``LiftedNetwork.reference``), that module computes the same map with a max-pool as one
pooling operation instead of the layers of its exact ReLU rewrite, and a batch norm or a
concatenation as it was written. It is used only after it has been checked here to agree
with the lifted forward at two points (the path's start and a random image in the same
range), to ``AGREE`` relative: otherwise, and for networks without one, the lifted forward.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from lbi_engine.protocols import Problem

#: the largest relative difference ||N_ref(x) - N(x)|| / ||N(x)|| accepted: float32's
#: rounding through a few dozen layers, with room, and far below any noise level lbi solves at
AGREE = 1e-4

Forward = Callable[[Tensor], Tensor]


def _agrees(reference: Forward, lifted: Forward, x: Tensor) -> bool:
    with torch.no_grad():
        try:
            a, b = reference(x), lifted(x)
        except (RuntimeError, ValueError, TypeError):  # a dtype, device or shape it refuses
            return False
        if a.shape != b.shape or not bool(torch.isfinite(a).all()):
            return False
        scale = float(torch.linalg.vector_norm(b))
        return float(torch.linalg.vector_norm(a - b)) <= AGREE * max(scale, 1e-30)


def exact_forward(problem: Problem, start: Tensor) -> tuple[Forward, str]:
    """(N, where it comes from: "translated module" or "lifted layers") for the path that
    starts at ``start`` (a batch of the problem's inputs)."""
    network = problem.network
    lifted: Forward = network.forward
    reference = getattr(network, "reference", None)
    if reference is None:
        return lifted, "lifted layers"
    generator = torch.Generator(device="cpu").manual_seed(0)
    lo, hi = float(start.min()), float(start.max())
    spread = max(hi - lo, float(problem.data_range))
    probe = (start + spread * (torch.rand(start.shape, generator=generator, dtype=start.dtype)
                               .to(start.device) - 0.5))
    if _agrees(reference, lifted, start) and _agrees(reference, lifted, probe):
        return reference, "translated module"
    return lifted, "lifted layers"
