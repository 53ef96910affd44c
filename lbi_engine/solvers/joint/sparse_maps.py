"""Small convolutions as sparse matrices, for solvers that apply them thousands of times.

On the CPU with one thread, ``conv2d`` and especially ``conv_transpose2d`` on one 28x28 image
cost 60-330 us per call (measured on the zoo's CNN, mostly setup: im2col/col2im buffers),
while the same map stored as a CSR matrix costs 50-60 us per matrix-vector product. For the
joint method, whose step is one product with every W_l and one with every W_l^T, the
convolutions were ~60 % of the step's time. The matrices are the maps themselves (built by
applying the map to the unit vectors, so they agree to rounding with ``linear``/``adjoint``);
they are built once per weight tensor and geometry (maps never change after construction,
see ``AffineMap``; every run of a network makes new map objects around the same weights, and
a build costs ~20 ms) and only when the dense build stays small (``MAX_DENSE`` entries).
One sample's joint step on the CPU uses a faster form of the same convolutions
(``kernels.gathered_conv``: a gathered GEMM); batches use these matrices.
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

from lbi_engine.operators import AffineMap
from lbi_engine.solvers.joint.tensor_cache import TensorKeyed

#: Largest in_numel * out_numel of a map built densely before sparsifying (32 MB in float32).
MAX_DENSE = 2**23
#: Denser matrices than this are left to the map's own kernels (dense GEMV is as fast).
MAX_DENSITY = 0.2

# weight tensor -> {(dtype, geometry, bias): matrices}; weak, so a dropped network frees it
_CACHE: TensorKeyed[dict[tuple[object, ...], SparseLinear | None]] = TensorKeyed()


class SparseLinear:
    """W and W^T of an affine map as CSR matrices: ``linear`` and ``adjoint`` on (B, ...)."""

    def __init__(self, affine: AffineMap, forward: Tensor, backward: Tensor,
                 bias: Tensor | None) -> None:
        # no reference to ``affine``: the cache's value must not keep its weak key alive
        self.in_shape = tuple(affine.in_shape)
        self.out_shape = tuple(affine.out_shape)
        self.bias = bias  # b_l over the whole output (B = 1), or None
        self.forward_matrix, self.backward_matrix = forward, backward

    def linear(self, x: Tensor) -> Tensor:
        return _product(self.forward_matrix, x, self.out_shape)

    def adjoint(self, r: Tensor) -> Tensor:
        return _product(self.backward_matrix, r, self.in_shape)

    def apply(self, x: Tensor) -> Tensor:
        y = self.linear(x)
        return y if self.bias is None else y + self.bias


def _product(matrix: Tensor, v: Tensor, shape: tuple[int, ...]) -> Tensor:
    batch = v.shape[0]
    if batch == 1:
        return torch.mv(matrix, v.reshape(-1)).reshape(1, *shape)
    return (matrix @ v.reshape(batch, -1).T).T.reshape(batch, *shape)


def sparse_or_self(affine: AffineMap, like: Tensor) -> AffineMap | SparseLinear:
    """A :class:`SparseLinear` for a small, sparse convolution on the CPU, else ``affine``."""
    if like.device.type != "cpu" or type(affine).__name__ != "Conv2dMap":
        return affine
    weight = getattr(affine, "weight", None)
    if not isinstance(weight, Tensor):
        return affine
    bias = getattr(affine, "bias", None)
    key = (like.dtype, weight.dtype, tuple(affine.in_shape), tuple(affine.out_shape),
           tuple(getattr(affine, "stride", ())), tuple(getattr(affine, "dilation", ())),
           int(getattr(affine, "groups", 1)), tuple(getattr(affine, "pads", ())),
           None if bias is None else (bias.data_ptr(), bias._version), weight._version)
    cached = _CACHE.get(weight)
    if cached is not None and key in cached:
        return cached[key] or affine
    built = _build(affine, like.dtype)
    if cached is None:
        cached = {}
        _CACHE.put(weight, cached)
    cached[key] = built
    return built or affine


def _build(affine: AffineMap, dtype: torch.dtype) -> SparseLinear | None:
    n_in, n_out = int(affine.in_numel), int(affine.out_numel)
    if n_in * n_out > MAX_DENSE:
        return None
    with torch.no_grad():
        eye = torch.eye(n_in, dtype=dtype).reshape(n_in, *affine.in_shape)
        columns = affine.linear(eye).reshape(n_in, n_out)  # row j = W e_j
        if int(torch.count_nonzero(columns)) > MAX_DENSITY * n_in * n_out:
            return None
        bias = None
        if affine.bias is not None:  # the bias as the map adds it, over the whole output
            zero = torch.zeros((1, *affine.in_shape), dtype=dtype)
            bias = affine.apply(zero) - affine.linear(zero)
        with warnings.catch_warnings():  # "sparse CSR support is in beta"
            warnings.simplefilter("ignore", UserWarning)
            forward = _int32(columns.T.contiguous().to_sparse_csr())
            backward = _int32(columns.contiguous().to_sparse_csr())
    return SparseLinear(affine, forward, backward, bias)


def _int32(matrix: Tensor) -> Tensor:
    """The same CSR matrix with 32-bit indices: a product reads values and column indices,
    and halving the index bytes made it 1.5x faster on the zoo's CNN (42 -> 27 us for the
    8 -> 16 channel convolution, one thread)."""
    if matrix.values().numel() >= 2**31 - 1:
        return matrix
    return torch.sparse_csr_tensor(matrix.crow_indices().to(torch.int32),
                                   matrix.col_indices().to(torch.int32), matrix.values(),
                                   matrix.shape)
