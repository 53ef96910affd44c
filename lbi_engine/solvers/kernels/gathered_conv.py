"""One sample's products with a convolution as a gathered GEMM, in compiled code.

The joint method's one-sample step (``joint.one_sample``) takes a product with every W_l and every
W_l^T per step. As CSR matrices (``joint.sparse_maps``) the zoo CNN's two convolutions cost
11 + 10 us (1 -> 8 channels) and 27 + 27 us (8 -> 16 channels) per step, half of it: CSR
reads a value and a column index per multiply-add, and the 8 -> 16 matrix and its transpose
(0.7 MB each) do not stay in the core's cache. The same products as im2col + a small GEMM
read only the 16 x 128 weights and a gathered patch matrix:

    patch[k, p] = x_pad[idx[k, p]]          (k = (c, kh, kw), p = output pixel)
    W x + b     = W_mat @ patch + b          (W_mat: the weight as C_out x (C_in kh kw))
    W^T r       = scatter_add(idx, W_mat^T @ r)

3 + 3 us and 6 + 7 us on the same maps (``benchmarks.studies.bench_multilayer`` section 4 times the
whole step). ``idx`` holds every (input channel, kernel offset, output pixel)'s flat input
index, or ``n`` (a zero slot past the input) where the kernel reads padding, so one index
array carries stride, dilation and any (asymmetric) padding. The GEMMs are numba's ``np.dot``
(scipy's BLAS). Groups other than 1 are left to the CSR path. Imports numba: import only
when about to be used.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from lbi_engine.operators.backend import jit as _jit

#: numpy views of the tensors the products were called with, by (address, size): the
#: fast path calls them on the same buffers thousands of times, and ``Tensor.numpy()`` costs
#: ~0.8 us. The tensor is kept with its view, so its memory (and address) stays its own.
_VIEWS_MAX = 64


@functools.lru_cache(maxsize=64)  # a pure function of the geometry; every solve rebuilds
def im2col_index(in_shape: tuple[int, int, int], kernel: tuple[int, int],
                 stride: tuple[int, int], pads: tuple[int, int, int, int],
                 dilation: tuple[int, int]) -> np.ndarray:
    """idx[k, p] (int32): the flat input index that weight column k = (c, kh, kw) meets at
    output pixel p, or C*H*W (the zero slot) where it meets padding; ``pads`` = (top,
    bottom, left, right). Computed by ``F.unfold`` of the padded input's 1-based positions,
    so its geometry is torch's convolution's. Cached per geometry (the alpha search builds a
    solve per alpha): callers must not write into the array."""
    c, h, w = in_shape
    n = c * h * w
    if n >= 2**31 - 1:  # the indices are int32 (positions pass unfold as exact float64)
        raise ValueError(f"input of {n} entries is too large for a gathered convolution")
    positions = torch.arange(1, n + 1, dtype=torch.float64).reshape(1, c, h, w)
    top, bottom, left, right = pads
    padded = F.pad(positions, (left, right, top, bottom))  # 0 where the kernel reads padding
    cols = F.unfold(padded, kernel, dilation=dilation, stride=stride)[0]
    idx = cols.to(torch.int64) - 1
    idx[idx < 0] = n
    out = idx.to(torch.int32).numpy().copy()
    out.flags.writeable = False  # shared by every build of the same geometry
    return out


class ConvProducts:
    """W x + b, W^T r and out += W^T r of a 2-d convolution (groups 1) for one sample, on
    flat contiguous CPU tensors (the interface of ``joint.one_sample.MatrixProducts``)."""

    def __init__(self, weight: Tensor, bias: Tensor | None, idx: np.ndarray,
                 n_in: int) -> None:
        cout = int(weight.shape[0])
        self._w = np.ascontiguousarray(weight.detach().reshape(cout, -1).numpy())
        self._wt = np.ascontiguousarray(self._w.T)
        self._idx = idx
        self._patch = np.empty(idx.shape, dtype=self._w.dtype)  # the gathered input
        self._n_in, self._n_out = n_in, cout * int(idx.shape[1])
        self._bias = (np.zeros(self._n_out, dtype=self._w.dtype) if bias is None
                      else np.ascontiguousarray(bias.detach().reshape(-1).numpy()))
        self._views: dict[tuple[int, int, int], tuple[Tensor, np.ndarray]] = {}

    @classmethod
    def build(cls, affine: Any, bias: Tensor | None, dtype: torch.dtype) -> ConvProducts | None:
        """The products for a ``Conv2dMap`` with groups 1 whose weight has ``dtype``, with
        ``bias`` over the whole output (as ``SparseLinear`` holds it), else None."""
        weight = getattr(affine, "weight", None)
        if (type(affine).__name__ != "Conv2dMap" or not isinstance(weight, Tensor)
                or int(getattr(affine, "groups", 1)) != 1 or weight.dtype != dtype
                or weight.device.type != "cpu"):
            return None
        c, h, w = (int(v) for v in affine.in_shape)
        try:
            idx = im2col_index((c, h, w), (int(weight.shape[2]), int(weight.shape[3])),
                               tuple(affine.stride), tuple(affine.pads), tuple(affine.dilation))
        except ValueError:
            return None
        if idx.shape[1] * int(weight.shape[0]) != int(affine.out_numel):
            return None
        products = cls(weight, bias, idx, c * h * w)
        products._warm_up()
        return products

    def _warm_up(self) -> None:
        """Compiles (or loads from numba's cache) the kernels for this dtype, outside any
        run's stopwatch."""
        x = np.zeros(self._n_in, dtype=self._w.dtype)
        out = np.zeros(self._n_out, dtype=self._w.dtype)
        conv_forward(x, self._idx, self._w, self._bias, self._patch, out)
        conv_adjoint(out, self._idx, self._wt, x, False)

    def _np(self, t: Tensor) -> np.ndarray:
        key = (t.data_ptr(), t.numel(), t.stride(-1))
        found = self._views.get(key)
        if found is None:
            if len(self._views) >= _VIEWS_MAX:
                self._views.clear()
            found = self._views[key] = (t, t.numpy())
        return found[1]

    def apply_into(self, x: Tensor, out: Tensor) -> Tensor:
        """out = W x + b."""
        conv_forward(self._np(x), self._idx, self._w, self._bias, self._patch, self._np(out))
        return out

    def adjoint_into(self, r: Tensor, out: Tensor) -> Tensor:
        """out = W^T r."""
        conv_adjoint(self._np(r), self._idx, self._wt, self._np(out), False)
        return out

    def adjoint_add(self, r: Tensor, out: Tensor) -> Tensor:
        """out += W^T r."""
        conv_adjoint(self._np(r), self._idx, self._wt, self._np(out), True)
        return out


@_jit()
def conv_forward(x, idx, w, bias, patch, out):
    """out = w @ patch + bias, patch[k, p] = x[idx[k, p]] (0 at the slot len(x)); ``patch``
    a buffer of idx's shape."""
    n = x.shape[0]
    k_count, pixels = idx.shape
    for k in range(k_count):
        for p in range(pixels):
            i = idx[k, p]
            patch[k, p] = x[i] if i < n else 0.0
    product = np.dot(w, patch)
    cout = w.shape[0]
    for c in range(cout):
        for p in range(pixels):
            out[c * pixels + p] = product[c, p] + bias[c * pixels + p]


@_jit()
def conv_adjoint(r, idx, wt, out, add):
    """out (+)= scatter_add(idx, wt @ r): W^T r, r flat (C_out * pixels); the zero slot's
    sums are dropped."""
    n = out.shape[0]
    k_count, pixels = idx.shape
    product = np.dot(wt, r.reshape(wt.shape[1], pixels))
    if not add:
        for i in range(n):
            out[i] = 0.0
    for k in range(k_count):
        for p in range(pixels):
            i = idx[k, p]
            if i < n:
                out[i] += product[k, p]
