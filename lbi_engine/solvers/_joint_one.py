"""The joint method's gradient for one sample on the CPU, on buffers made once (issue #23).

    grad_{x_0} f = W_1^T (sigma_1(z_1) - x_1),
    grad_{x_l} f = (x_l - z_l) + W_{l+1}^T (sigma_{l+1}(z_{l+1}) - x_{l+1}),
    z_l = W_l x_{l-1} + b_l

(``_joint_accel`` derives it). With one 28x28 image the products with W are ~110 us of a
~260 us step; the rest was per-call overhead of the general path (reshapes, new tensors, the
activations' checked methods). Here every product writes into its buffer (``torch.mv`` /
``torch.addmv`` with ``out=``) and the activations used by the zoo's networks (ReLU, the
identity) are one in-place operation each, so a step makes no new tensor. Used only where
every map is a matrix on the flattened sample (CSR convolutions, linear layers) of the
iterate's dtype; elsewhere the general path runs. Both compute the same sums in the same
order up to the association of the bias, so they agree to rounding (tested).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
from torch import Tensor

from lbi_engine.protocols import Layer, Operator
from lbi_engine.solvers._inplace import dense_matrix
from lbi_engine.solvers._sparse_maps import SparseLinear

# activations whose sigma the fast path applies in place, by class name
_IN_PLACE = ("ReLU", "Identity")


class OneSampleGradient:
    """grad f for one sample of a network whose maps are all matrices (see module doc)."""

    def __init__(self, matrices: list[tuple[Tensor, Tensor, Tensor | None]],
                 kinds: list[str], y_delta: Tensor) -> None:
        self._mats = matrices  # per layer: (W, W^T, b or None), flat
        self._kinds = kinds
        self._target = y_delta.reshape(-1)
        like = y_delta
        self._z = [torch.empty(w.shape[0], dtype=like.dtype) for w, _, _ in matrices]
        self._r = [torch.empty(w.shape[0], dtype=like.dtype) for w, _, _ in matrices]

    @classmethod
    def build(cls, layers: Sequence[Layer], maps: Sequence[object], y_delta: Tensor,
              batch: int) -> OneSampleGradient | None:
        """The fast path for these layers, or None where it does not apply."""
        if batch != 1 or y_delta.device.type != "cpu" or not y_delta.is_contiguous():
            return None
        kinds = [type(layer.activation).__name__ for layer in layers]
        if any(kind not in _IN_PLACE for kind in kinds):
            return None
        matrices = []
        for used in maps:
            found = _matrices(used, y_delta.dtype)
            if found is None:
                return None
            matrices.append(found)
        return cls(matrices, kinds, y_delta)

    def _affine_into(self, i: int, x: Tensor, out: Tensor) -> Tensor:
        """out = W_i x + b_i (one BLAS or sparse call, the bias fused)."""
        w, _, bias = self._mats[i]
        if bias is None:
            return torch.mv(w, x, out=out)
        return torch.addmv(bias, w, x, out=out)

    def __call__(self, ys: list[Tensor], grads: list[Tensor]) -> None:
        """Writes grad f at the blocks ``ys`` into ``grads`` (flat contiguous views, 1-D)."""
        depth = len(self._mats)
        for i, (_, wt, _) in enumerate(self._mats):
            z, r = self._affine_into(i, ys[i], self._z[i]), self._r[i]
            target = ys[i + 1] if i + 1 < depth else self._target
            if self._kinds[i] == "ReLU":
                torch.clamp(z, min=0.0, out=r).sub_(target)
            else:
                torch.sub(z, target, out=r)
            g = grads[i]
            if i == 0:
                torch.mv(wt, r, out=g)
            else:  # (x_i - z_i) + W^T r
                torch.sub(ys[i], self._z[i - 1], out=g)
                torch.addmv(g, wt, r, out=g)


    def objective(self, xs: list[Tensor]) -> tuple[Tensor, Tensor] | None:
        """(Bregman terms (1, L), discrepancy (1,)) at the blocks ``xs`` (flat views, the
        auxiliary ones clamped into dom Psi by the step), or None where the last layer's
        loss needs the general, checked formula (a ReLU last layer: y_delta may lie outside
        its domain). The forward pass of x_0 for the discrepancy starts from the first
        term's sigma(W_1 x_0 + b_1)."""
        if self._kinds[-1] != "Identity":
            return None
        depth = len(self._mats)
        terms = []
        for i in range(depth):
            z, r = self._affine_into(i, xs[i], self._z[i]), self._r[i]
            target = xs[i + 1] if i + 1 < depth else self._target
            if self._kinds[i] == "ReLU":  # 1/2 ||x - z_+||^2 + <x, z_->, both >= 0 on x >= 0
                torch.clamp(z, min=0.0, out=r)
                gap = torch.dist(target, r)
                terms.append(0.5 * gap * gap + torch.dot(target, r - z).clamp_min(0.0))
            else:
                gap = torch.dist(target, z)
                terms.append(0.5 * gap * gap)
        out = self._r[0] if self._kinds[0] == "ReLU" else self._z[0]
        for i in range(1, depth):
            z = self._affine_into(i, out, self._z[i])
            out = z.clamp_(min=0.0) if self._kinds[i] == "ReLU" else z
        discrepancy = torch.dist(out, self._target).reshape(1)
        return torch.stack(terms).reshape(1, depth), discrepancy


def _matrices(used: object, dtype: torch.dtype
              ) -> tuple[Tensor, Tensor, Tensor | None] | None:
    """(W, W^T, b) of a layer's map as matrices on flat samples, or None."""
    if isinstance(used, SparseLinear):
        forward, backward = used._w, used._wt
        bias = None if used.bias is None else used.bias.reshape(-1).contiguous()
    else:
        dense = dense_matrix(cast(Operator, used))
        if dense is None:
            return None
        forward, bias = dense
        backward = forward.t()
    if forward.dtype != dtype or (bias is not None and bias.dtype != dtype):
        return None
    # the products write into buffers (out=), which autograd refuses for weights that
    # require grad; the solver never differentiates through them
    return forward.detach(), backward.detach(), None if bias is None else bias.detach()
