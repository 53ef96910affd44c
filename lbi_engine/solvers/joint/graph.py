"""The joint method's gradient and block bounds on a graph network (MATH.md §5.6): layers whose
pre-activation sums terms A_{l,j} x_j of several states (residual additions, channel
concatenations), for ``fista.JointFista``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from lbi_engine.models.network import sum_of_terms


def graph_gradient(layers: Sequence[Any], graph: list[list[tuple[int, Any]]], y_delta: Tensor,
                   ys: list[Tensor], g_blocks: list[Tensor]) -> None:
    """grad f over a graph (MATH.md §5.6): x_j gets x_j - z_j from the layer that makes it
    and A_{l,j}^T (sigma_l(z_l) - x_l) from every layer l that takes it."""
    depth = len(layers)
    # a block's first contribution is written, later ones added (no zeroing pass over
    # the blocks: on a 128x128 resnet slice they hold ~1.8M entries)
    written = [False] * len(g_blocks)
    for i, (layer, terms) in enumerate(zip(layers, graph, strict=True)):
        z = sum_of_terms(terms, ys)  # may be ys[j] itself (a map may return its input)
        target = ys[i + 1] if i + 1 < depth else y_delta
        r = layer.activation.sigma(z)
        # in place, unless sigma handed back z's own memory (z is used below)
        shared = r.untyped_storage().data_ptr() == z.untyped_storage().data_ptr()
        r = r - target.reshape(z.shape) if shared else r.sub_(target.reshape(z.shape))
        for j, amap in terms:
            back = amap.adjoint(r).reshape(g_blocks[j].shape)
            if written[j]:
                g_blocks[j].add_(back)
            else:
                g_blocks[j].copy_(back)
                written[j] = True
        if i + 1 < depth:  # x_{i+1} - z_{i+1}: layer i+1's consumers come later
            torch.sub(ys[i + 1], z.reshape(ys[i + 1].shape), out=g_blocks[i + 1])
            written[i + 1] = True


def graph_bounds(network: Any) -> list[float]:
    """m_j with diag(m) >= hess f block-wise for a graph network (MATH.md §5.6):
    m_j = [j > 0] (1 + sum_{k in in(j-1)} ||A_{j-1,k}||)
          + sum_{l takes x_j} ||A_{l,j}|| (1 + sum_{k in in(l)} ||A_{l,k}||);
    for a chain this is the chain's m_0 = ||W_1||^2 + ||W_1|| and
    m_l = 1 + ||W_{l+1}||^2 + ||W_l|| + ||W_{l+1}||."""
    depth = len(network.layers)
    terms = [network.terms(i) for i in range(depth)]
    norms = [[float(amap.norm()) for _, amap in t] for t in terms]
    m = [0.0] * depth
    for i, (t, n) in enumerate(zip(terms, norms, strict=True)):
        if i + 1 < depth:  # the layer's own Bregman term in its output x_{i+1}
            m[i + 1] += 1.0 + sum(n)
        for (j, _), a in zip(t, n, strict=True):
            m[j] += a * (1.0 + sum(n))
    return m
