"""One sample's convolution products as a gathered GEMM (``kernels.gathered_conv``).

Checked against torch's own convolution (``Conv2dMap.apply`` / ``adjoint``, i.e. F.conv2d and
F.conv_transpose2d) over geometries that exercise every part of the gather index: strides,
dilation, asymmetric padding, rectangular kernels and images, no bias; in float64 to
rounding and in float32 to float32 rounding; plus the adjoint identity <W x, r> = <x, W^T r>
and that the joint method's one-sample path takes these products for a convolution.
"""

from __future__ import annotations

import pytest
import torch

from lbi_engine.operators.conv import Conv2dMap
from lbi_engine.solvers.joint.fista import JointFista
from lbi_engine.solvers.joint.sparse_maps import sparse_or_self
from lbi_engine.solvers.kernels.gathered_conv import ConvProducts, im2col_index

pytest.importorskip("numba")

GEOMETRIES = [
    # (in_shape, out channels, kernel, stride, pads (t, b, l, r), dilation, bias)
    ((1, 28, 28), 8, (4, 4), 2, (1, 1, 1, 1), 1, True),  # the zoo CNN's first layer
    ((8, 14, 14), 16, (4, 4), 2, (1, 1, 1, 1), 1, True),  # and its second
    ((3, 9, 11), 5, (3, 2), (1, 3), (2, 0, 1, 1), 1, True),  # asymmetric pads, rectangles
    ((2, 10, 10), 4, (3, 3), 1, (2, 2, 2, 2), 2, False),  # dilation, no bias
    ((4, 7, 6), 3, (1, 1), 1, (0, 0, 0, 0), 1, True),  # a 1x1 convolution
]


def _map(geometry: tuple, dtype: torch.dtype) -> Conv2dMap:
    in_shape, cout, kernel, stride, pads, dilation, bias = geometry
    torch.manual_seed(3)
    weight = torch.randn(cout, in_shape[0], *kernel, dtype=dtype)
    b = torch.randn(cout, dtype=dtype) if bias else None
    return Conv2dMap(weight, b, in_shape, stride=stride, pads=pads, dilation=dilation)


def _products(conv: Conv2dMap) -> ConvProducts:
    zero = torch.zeros((1, *conv.in_shape), dtype=conv.weight.dtype)
    bias = None if conv.bias is None else (conv.apply(zero) - conv.linear(zero)).reshape(-1)
    products = ConvProducts.build(conv, bias, conv.weight.dtype)
    assert products is not None
    return products


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_the_gathered_products_are_torchs_convolution(geometry: tuple,
                                                      dtype: torch.dtype) -> None:
    conv = _map(geometry, dtype)
    products = _products(conv)
    torch.manual_seed(4)
    x = torch.randn((1, *conv.in_shape), dtype=dtype)
    r = torch.randn((1, *conv.out_shape), dtype=dtype)
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    out = torch.full((conv.out_numel,), float("nan"), dtype=dtype)
    products.apply_into(x.reshape(-1), out)
    expected = conv.apply(x).reshape(-1)
    torch.testing.assert_close(out, expected, rtol=0, atol=tol * float(expected.abs().max()))
    back = torch.full((conv.in_numel,), float("nan"), dtype=dtype)
    products.adjoint_into(r.reshape(-1), back)
    expected_back = conv.adjoint(r).reshape(-1)
    scale = float(expected_back.abs().max())
    torch.testing.assert_close(back, expected_back, rtol=0, atol=tol * scale)
    start = torch.randn(conv.in_numel, dtype=dtype)
    added = start.clone()
    products.adjoint_add(r.reshape(-1), added)
    torch.testing.assert_close(added, start + expected_back, rtol=0, atol=2 * tol * scale)


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_the_gathered_adjoint_is_the_adjoint(geometry: tuple) -> None:
    conv = _map(geometry, torch.float64)
    products = ConvProducts.build(conv, None, torch.float64)  # W alone, no bias
    assert products is not None
    torch.manual_seed(6)
    x, r = torch.randn(conv.in_numel, dtype=torch.float64), torch.randn(conv.out_numel,
                                                                         dtype=torch.float64)
    wx, wtr = torch.empty_like(r), torch.empty_like(x)
    products.apply_into(x, wx)
    products.adjoint_into(r, wtr)
    lhs, rhs = float(wx @ r), float(x @ wtr)
    assert abs(lhs - rhs) <= 1e-12 * max(abs(lhs), 1.0)


def test_the_index_marks_padding_with_the_zero_slot() -> None:
    # a 1-channel 3x3 image, 2x2 kernel, stride 1, one pixel of padding on top and left:
    # the first output pixel's window covers the padding row and column, then pixel 0
    idx = im2col_index((1, 3, 3), (2, 2), (1, 1), (1, 0, 1, 0), (1, 1))
    assert idx.shape == (4, 9)
    assert idx[:, 0].tolist() == [9, 9, 9, 0]  # 9 = the zero slot past the 9 pixels
    assert idx[:, 4].tolist() == [0, 1, 3, 4]  # output (1, 1): rows 0-1, columns 0-1


def test_grouped_convolutions_are_left_to_the_sparse_path() -> None:
    weight = torch.randn(4, 1, 3, 3, dtype=torch.float64)
    conv = Conv2dMap(weight, None, (2, 6, 6), pads=1, groups=2)
    assert ConvProducts.build(conv, None, torch.float64) is None


def test_the_joint_one_sample_path_takes_the_gathered_products() -> None:
    from tests.engine.solvers.test_solver_joint_one import _biased_cnn

    problem = _biased_cnn(torch.float32)
    torch.manual_seed(1)
    x = torch.rand_like(problem.zeros_input())
    state = JointFista(problem, [x, *problem.forward_aux(x)])
    assert state.one is not None
    kinds = [type(p).__name__ for p in state.one._prods]
    assert kinds == ["ConvProducts", "ConvProducts", "MatrixProducts"]
    # and the sparse matrices are still what the batched path uses
    assert type(sparse_or_self(problem.network.layers[0].affine, x)).__name__ == "SparseLinear"
