"""The joint method's gradient for one sample on the CPU, on buffers made once.

    grad_{x_0} f = W_1^T (sigma_1(z_1) - x_1),
    grad_{x_l} f = (x_l - z_l) + W_{l+1}^T (sigma_{l+1}(z_{l+1}) - x_{l+1}),
    z_l = W_l x_{l-1} + b_l

(``fista`` derives it). With one 28x28 image the products with W are ~110 us of a
~260 us step; the rest was per-call overhead of the general path (reshapes, new tensors, the
activations' checked methods). Here every product writes into its buffer (``torch.mv`` /
``torch.addmv`` with ``out=``) and the activations used by the zoo's networks (ReLU, the
identity) are one in-place operation each, so a step makes no new tensor. Used only where
every map is a matrix on the flattened sample (CSR convolutions, linear layers) of the
iterate's dtype; elsewhere the general path runs. A convolution's products here are a
gathered GEMM (``kernels.gathered_conv``, 3-4x faster than its CSR matrix on the zoo CNN)
where numba is usable; the batched path keeps the CSR matrices. The two paths sum in different
orders, so they agree to rounding (tested).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import ModuleType
from typing import Protocol, cast

import torch
from torch import Tensor

from lbi_engine.operators.backend import numba_enabled
from lbi_engine.protocols import Layer, Operator
from lbi_engine.solvers.joint.sparse_maps import SparseLinear
from lbi_engine.solvers.one_layer.inplace import dense_matrix

# activations whose sigma the fast path applies in place, by class name
_IN_PLACE = ("ReLU", "Identity")


class OneSampleGradient:
    """grad f for one sample of a network whose maps are all matrices (see module doc)."""

    def __init__(self, products: list[Products], sizes: list[int],
                 kinds: list[str], y_delta: Tensor) -> None:
        self._prods = products  # per layer: W x + b, W^T r into buffers
        self._kinds = kinds
        self._target = y_delta.reshape(-1)
        self.z = [torch.empty(n, dtype=y_delta.dtype) for n in sizes]
        self._r = [torch.empty(n, dtype=y_delta.dtype) for n in sizes]
        self._sums = _compiled_sums()

    @classmethod
    def build(cls, layers: Sequence[Layer], maps: Sequence[object], y_delta: Tensor,
              batch: int) -> OneSampleGradient | None:
        """The fast path for these layers, or None where it does not apply."""
        if batch != 1 or y_delta.device.type != "cpu" or not y_delta.is_contiguous():
            return None
        kinds = [type(layer.activation).__name__ for layer in layers]
        if any(kind not in _IN_PLACE for kind in kinds):
            return None
        products: list[Products] = []
        for layer, used in zip(layers, maps, strict=True):
            found = _products(layer.affine, used, y_delta.dtype)
            if found is None:
                return None
            products.append(found)
        sizes = [math.prod(layer.affine.out_shape) for layer in layers]
        return cls(products, sizes, kinds, y_delta)

    def __call__(self, ys: list[Tensor], grads: list[Tensor]) -> None:
        """Writes grad f at the blocks ``ys`` into ``grads`` (flat contiguous views, 1-D)."""
        for i, prod in enumerate(self._prods):
            prod.apply_into(ys[i], self.z[i])
        self.from_pre_activations(ys, self.z, grads)

    def forward_into(self, xs: list[Tensor], zs: list[Tensor]) -> None:
        """zs[i] = W_i xs[i] + b_i: the pre-activations of the blocks ``xs``."""
        for i, prod in enumerate(self._prods):
            prod.apply_into(xs[i], zs[i])

    def from_pre_activations(self, ys: list[Tensor], zs: list[Tensor],
                             grads: list[Tensor]) -> None:
        """grad f at ``ys`` given their pre-activations ``zs`` (W_i ys[i] + b_i): the
        products with W^T only. The joint step forms z at the extrapolated point from those
        of the last two iterates (z is affine in x), so its products with W are taken at the
        iterates, whose records then need no products for their Bregman terms."""
        depth = len(self._prods)
        for i, prod in enumerate(self._prods):
            z, r = zs[i], self._r[i]
            target = ys[i + 1] if i + 1 < depth else self._target
            if self._kinds[i] == "ReLU":
                torch.clamp(z, min=0.0, out=r).sub_(target)
            else:
                torch.sub(z, target, out=r)
            g = grads[i]
            if i == 0:
                prod.adjoint_into(r, g)
            else:  # (x_i - z_i) + W^T r
                torch.sub(ys[i], zs[i - 1], out=g)
                prod.adjoint_add(r, g)

    def objective_values(self, xs: list[Tensor], zs: list[Tensor] | None = None
                         ) -> tuple[list[float], float] | None:
        """(Bregman terms, discrepancy) at the blocks ``xs`` (flat views, the auxiliary ones
        clamped into dom Psi by the step) as float64 sums, or None: without numba, and where
        the last layer's loss needs the general, checked formula (a ReLU last layer: y_delta
        may lie outside its domain). The forward pass of x_0 for the discrepancy starts from
        the first term's sigma(W_1 x_0 + b_1)."""
        sums = self._sums
        if sums is None or self._kinds[-1] != "Identity":
            return None
        depth = len(self._prods)
        values: list[float] = []
        for i in range(depth):  # zs: the blocks' pre-activations when the caller has them
            z = self._prods[i].apply_into(xs[i], self.z[i]) if zs is None else zs[i]
            target = xs[i + 1] if i + 1 < depth else self._target
            if self._kinds[i] == "ReLU":
                values.append(sums.relu_bregman(target.numpy(), z.numpy()))
                torch.clamp(z, min=0.0, out=self._r[i])  # sigma(z) for the forward pass
            else:
                values.append(sums.half_sq_dist(target.numpy(), z.numpy()))
        out = self._r[0] if self._kinds[0] == "ReLU" else (self.z[0] if zs is None else zs[0])
        for i in range(1, depth):
            z = self._prods[i].apply_into(out, self.z[i])
            out = z.clamp_(min=0.0) if self._kinds[i] == "ReLU" else z
        half = sums.half_sq_dist(out.numpy(), self._target.numpy())
        return values, math.sqrt(2.0 * half)


class Products(Protocol):
    """A layer's one-sample products into buffers (flat contiguous CPU tensors)."""

    def apply_into(self, x: Tensor, out: Tensor) -> Tensor: ...
    def adjoint_into(self, r: Tensor, out: Tensor) -> Tensor: ...
    def adjoint_add(self, r: Tensor, out: Tensor) -> Tensor: ...


class MatrixProducts:
    """One-sample products with a matrix (dense, or CSR with its transpose), into buffers."""

    def __init__(self, w: Tensor, wt: Tensor, bias: Tensor | None) -> None:
        self._w, self._wt, self._bias = w, wt, bias

    def apply_into(self, x: Tensor, out: Tensor) -> Tensor:
        """out = W x + b (one BLAS or sparse call, the bias fused)."""
        if self._bias is None:
            return torch.mv(self._w, x, out=out)
        return torch.addmv(self._bias, self._w, x, out=out)

    def adjoint_into(self, r: Tensor, out: Tensor) -> Tensor:
        """out = W^T r."""
        return torch.mv(self._wt, r, out=out)

    def adjoint_add(self, r: Tensor, out: Tensor) -> Tensor:
        """out += W^T r."""
        return torch.addmv(out, self._wt, r, out=out)


def _products(affine: object, used: object, dtype: torch.dtype) -> Products | None:
    """One run's products with a layer's map ``affine`` (``used``: the map as the solver
    uses it), or None: a convolution as a gathered GEMM where numba is usable
    (``kernels.gathered_conv``), else CSR or a dense matrix."""
    if isinstance(used, SparseLinear):
        bias = None if used.bias is None else used.bias.reshape(-1).contiguous()
        if numba_enabled():
            from lbi_engine.solvers.kernels.gathered_conv import ConvProducts

            conv = ConvProducts.build(affine, bias, dtype)
            if conv is not None:
                return conv
        forward, backward = used.forward_matrix, used.backward_matrix
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
    return MatrixProducts(forward.detach(), backward.detach(),
                          None if bias is None else bias.detach())


def _compiled_sums() -> ModuleType | None:
    """``kernels.bregman_sums`` where numba is usable (not with ``LBI_NO_NUMBA``), compiled (or
    loaded from numba's cache) here, outside any run's stopwatch; else None."""
    if not numba_enabled():
        return None
    import numpy as np

    from lbi_engine.solvers.kernels import bregman_sums

    for dtype in (np.float32, np.float64):
        one = np.ones(1, dtype=dtype)
        bregman_sums.relu_bregman(one, one)
        bregman_sums.half_sq_dist(one, one)
    return bregman_sums
