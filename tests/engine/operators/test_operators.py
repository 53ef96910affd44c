"""Affine maps: forward = the torch layer, adjoint test <Wx, r> = <x, W^T r>, norm = SVD.

Independent references: the torch modules themselves (forward), and the explicit matrix
built by pushing identity columns through the *module* (not through the map) for the norm.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import lbi_engine.operators as ops
import lbi_engine.operators._base as affine_base
from lbi_engine.errors import ShapeMismatchError, UnsupportedLayerError
from lbi_engine.models.layer_lifting import affine_from_modules, affine_map_of_module
from lbi_engine.operators import (
    ComposedMap,
    IdentityMap,
    LinearMap,
    PadMap,
    ReshapeMap,
    ScaleShiftMap,
)
from lbi_engine.operators.compose import compose
from lbi_engine.operators.conv import (
    AdaptiveAvgPool2dMap,
    AvgPool2dMap,
    Conv2dMap,
    ConvTranspose2dMap,
)

F64 = torch.float64

# (module factory, sample shape); every affine kind with many parameter combinations
CASES = [
    (lambda: nn.Linear(7, 5), (7,)),
    (lambda: nn.Linear(6, 4, bias=False), (3, 6)),  # Linear on the last dim of (3, 6)
    (lambda: nn.Conv2d(2, 3, 3), (2, 7, 6)),
    (lambda: nn.Conv2d(1, 8, 4, 2, 1), (1, 10, 10)),
    (lambda: nn.Conv2d(2, 4, 3, stride=3, padding=2), (2, 8, 7)),
    (lambda: nn.Conv2d(2, 2, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(2, 1)), (2, 9, 6)),
    (lambda: nn.Conv2d(4, 6, 3, padding=1, groups=2), (4, 5, 5)),
    (lambda: nn.Conv2d(3, 3, 3, groups=3, dilation=2, stride=2), (3, 9, 8)),
    # one input channel per group, several outputs each: the adjoint by col2im (F.fold)
    (lambda: nn.Conv2d(3, 9, 3, groups=3, stride=2, padding=1), (3, 9, 8)),
    (lambda: nn.Conv2d(2, 6, (3, 2), groups=2, stride=(2, 1), dilation=(1, 2)), (2, 7, 8)),
    (lambda: nn.Conv2d(2, 4, 4, padding="same", groups=2), (2, 6, 5)),
    # a strided kernel of 5 or more: the adjoint by phases (stride-1 convolutions, shuffled)
    (lambda: nn.Conv2d(3, 4, 7, 2, 3), (3, 12, 11)),
    (lambda: nn.Conv2d(2, 3, 5, 3), (2, 14, 13)),  # rows and columns the windows never read
    (lambda: nn.Conv2d(1, 2, (5, 6), (2, 3), (1, 2)), (1, 11, 13)),
    (lambda: nn.Conv2d(2, 3, 5, 2, padding="valid"), (2, 9, 10)),
    (lambda: nn.Conv2d(2, 3, 4, padding="same"), (2, 6, 5)),  # asymmetric 'same'
    (lambda: nn.Conv2d(2, 3, (2, 3), padding="same", dilation=(3, 1)), (2, 7, 6)),
    (lambda: nn.Conv2d(2, 3, 3, padding="valid"), (2, 5, 6)),
    (lambda: nn.ConvTranspose2d(3, 2, 3), (3, 4, 5)),
    (lambda: nn.ConvTranspose2d(16, 8, 4, 2, 1), (16, 4, 4)),
    (lambda: nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1), (2, 4, 3)),
    (lambda: nn.ConvTranspose2d(4, 6, (3, 2), stride=(3, 2), padding=(1, 0),
                                output_padding=(2, 1), groups=2), (4, 3, 4)),
    (lambda: nn.ConvTranspose2d(2, 2, 3, stride=1, dilation=3, output_padding=2), (2, 4, 4)),
    (lambda: nn.AvgPool2d(2), (3, 6, 6)),
    (lambda: nn.AvgPool2d(3, stride=2, padding=1), (2, 7, 8)),
    (lambda: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), (2, 7, 8)),
    (lambda: nn.AvgPool2d(3, stride=2, ceil_mode=True), (1, 8, 7)),
    (lambda: nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
     (2, 8, 9)),
    (lambda: nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True), (2, 6, 9)),
    (lambda: nn.AvgPool2d((2, 3), stride=(1, 2), divisor_override=5), (1, 5, 7)),
    (lambda: nn.AvgPool2d(2, stride=3), (1, 8, 8)),  # windows skip the last row/col
    (lambda: nn.AvgPool2d(2), (3, 8, 6)),  # windows tile the input (the copy adjoint)
    (lambda: nn.AvgPool2d((2, 3)), (2, 7, 8)),  # tiling but for the last row and 2 columns
    (lambda: nn.AdaptiveAvgPool2d(3), (2, 7, 8)),
    (lambda: nn.AdaptiveAvgPool2d((2, None)), (1, 5, 4)),
    (lambda: nn.AdaptiveAvgPool2d(1), (3, 4, 4)),
    (lambda: nn.Flatten(), (2, 3, 4)),
    (lambda: nn.Flatten(2), (2, 3, 4)),
    (lambda: nn.Unflatten(1, (3, 4)), (12,)),
    (lambda: nn.ZeroPad2d((1, 2, 0, 3)), (2, 3, 4)),
    (lambda: nn.ZeroPad2d((-1, 2, 1, -2)), (1, 5, 4)),
    (lambda: nn.BatchNorm2d(3), (3, 4, 5)),
    (lambda: nn.BatchNorm1d(4), (4,)),
    (lambda: nn.BatchNorm1d(4, affine=False), (4, 6)),
    (lambda: nn.Identity(), (3, 2)),
    (lambda: nn.Dropout(0.5), (5,)),
    (lambda: ops.ScaleShift(torch.tensor([2.0, -3.0, 0.5]), torch.tensor(1.5)), (4, 3)),
]
IDS = [f"{i}-{type(f()).__name__}" for i, (f, _) in enumerate(CASES)]


# small operators: one OpenMP thread (the fixture in tests/engine/conftest.py says why)
pytestmark = pytest.mark.usefixtures("one_thread")


def _module(factory, dtype=F64) -> nn.Module:
    torch.manual_seed(1)
    m = factory().to(dtype)
    if isinstance(m, nn.modules.batchnorm._BatchNorm):  # non-trivial statistics
        m.running_mean.uniform_(-1, 1)
        m.running_var.uniform_(0.5, 2.0)
        if m.affine:
            m.weight.data.uniform_(-2, 2)
            m.bias.data.uniform_(-1, 1)
    return m.eval()


def _matrix_of_module(m: nn.Module, shape: tuple[int, ...]) -> torch.Tensor:
    """W by pushing identity columns through the module (bias removed via m(0))."""
    n = int(torch.tensor(shape).prod())
    eye = torch.eye(n, dtype=F64).reshape(n, *shape)
    with torch.no_grad():
        cols = m(eye) - m(torch.zeros(1, *shape, dtype=F64))
    return cols.reshape(n, -1).T


def _adjoint_rel_err(amap, dtype, seed=0) -> float:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, *amap.in_shape, generator=g, dtype=F64).to(dtype)
    r = torch.randn(3, *amap.out_shape, generator=g, dtype=F64).to(dtype)
    wx, wtr = amap.linear(x), amap.adjoint(r)
    assert wx.shape == (3, *amap.out_shape) and wtr.shape == (3, *amap.in_shape)
    lhs, rhs = (wx * r).sum(dtype=F64), (x * wtr).sum(dtype=F64)
    return float((lhs - rhs).abs() / (wx.double().norm() * r.double().norm()))


@pytest.mark.parametrize(("factory", "shape"), CASES, ids=IDS)
def test_forward_equals_module_and_adjoint_float64(factory, shape):
    m = _module(factory)
    amap = affine_map_of_module(m, shape, require=True)
    x = torch.randn(4, *shape, dtype=F64)
    with torch.no_grad():
        want = m(x)
    assert amap.out_shape == tuple(want.shape[1:])
    assert torch.allclose(amap.apply(x), want, rtol=1e-12, atol=1e-12)
    assert _adjoint_rel_err(amap, F64) <= 1e-12


@pytest.mark.parametrize(("factory", "shape"), CASES, ids=IDS)
def test_adjoint_float32(factory, shape):
    amap = affine_map_of_module(_module(factory, torch.float32), shape, require=True)
    assert _adjoint_rel_err(amap, torch.float32) <= 1e-5


@pytest.mark.parametrize(("factory", "shape"), CASES, ids=IDS)
def test_norm_equals_svd_of_explicit_matrix(factory, shape):
    m = _module(factory)
    amap = affine_map_of_module(m, shape, require=True)
    w = _matrix_of_module(m, shape)
    sigma = float(torch.linalg.matrix_norm(w, ord=2))
    assert amap.norm() == pytest.approx(sigma, rel=1e-10, abs=1e-12)
    assert amap.norm_method == "exact"
    assert isinstance(amap.norm(), float)
    # dense() is the same matrix as the module's
    assert torch.allclose(amap.dense(dtype=F64), w, atol=1e-12)


@pytest.mark.parametrize(("factory", "shape"), [
    (lambda: nn.Conv2d(2, 3, 3, stride=2, padding=1), (2, 9, 9)),
    (lambda: nn.ConvTranspose2d(3, 2, 4, 2, 1), (3, 5, 5)),
    (lambda: nn.AvgPool2d(3, 2, 1, ceil_mode=True), (1, 11, 11)),
    (lambda: nn.Linear(40, 30), (40,)),
])
def test_iterative_norm_is_upper_bound_within_safety_factor(monkeypatch, factory, shape):
    monkeypatch.setattr(affine_base, "EXACT_MAX_SIDE", 0)
    m = _module(factory)
    amap = affine_map_of_module(m, shape)
    sigma = float(torch.linalg.matrix_norm(_matrix_of_module(m, shape), ord=2))
    est = amap.norm()
    assert amap.norm_method == "lanczos"
    assert sigma <= est <= 1.01 * sigma * (1 + 1e-5)
    # the raw Lanczos value is a lower bound and accurate far beyond the 1 % safety margin
    raw = ops.lanczos_norm(amap)
    assert raw <= sigma * (1 + 1e-12)
    assert (sigma - raw) / sigma < 1e-4


def test_iterative_norm_of_diagonal_and_zero_maps(monkeypatch):
    monkeypatch.setattr(affine_base, "EXACT_MAX_SIDE", 0)
    lin = LinearMap(torch.diag(torch.tensor([3.0, 1.0, 0.5], dtype=F64)), None)
    assert lin.norm() == pytest.approx(3.0 * 1.01, rel=1e-9)  # invariant subspace: exact
    assert LinearMap(torch.zeros(4, 3, dtype=F64), None).norm() == 0.0


def test_phase_adjoint_follows_a_replaced_weight():
    """The polyphase adjoint's weight is remade when the map's weight is replaced (``to``,
    ``operators.scaled``), so a rescaled or cast stem stays the adjoint of its forward."""
    from lbi_engine.operators.scaled import scaled

    torch.manual_seed(3)
    amap = Conv2dMap(torch.randn(4, 3, 7, 7, dtype=F64), None, (3, 16, 15), 2, 3)
    assert amap._by_phases and _adjoint_rel_err(amap, F64) <= 1e-12
    double = scaled(amap, 2.0, 1.0)
    r = torch.randn(1, *amap.out_shape, dtype=F64)
    assert torch.allclose(double.adjoint(r), 2.0 * amap.adjoint(r), rtol=1e-12, atol=1e-12)
    single = amap.to(dtype=torch.float32)
    assert single.adjoint(r.float()).dtype == torch.float32
    assert _adjoint_rel_err(single, torch.float32) <= 1e-5


def test_norm_cached_and_kept_by_to():
    amap = LinearMap(torch.randn(5, 4, dtype=F64), torch.zeros(5, dtype=F64))
    first = amap.norm()
    amap.weight.mul_(10)  # a cached norm is not recomputed (maps are immutable by contract)
    assert amap.norm() == first
    f32 = amap.to(dtype=torch.float32)
    assert f32.weight.dtype == torch.float32 and amap.weight.dtype == F64
    assert f32.norm() == first and f32 is not amap


def test_to_changes_dtype_of_every_kind():
    for factory, shape in CASES:
        amap = affine_map_of_module(_module(factory), shape, require=True).to(dtype=torch.float32)
        x = torch.randn(2, *shape)
        assert amap.apply(x).dtype == torch.float32
        assert amap.adjoint(torch.randn(2, *amap.out_shape)).dtype == torch.float32


@pytest.mark.parametrize("bn_first", [False, True])
@pytest.mark.parametrize("layer", ["linear", "conv", "convT"])
def test_batchnorm_folding_equals_module(layer, bn_first):
    torch.manual_seed(2)
    if layer == "linear":
        aff, bn, shape = nn.Linear(6, 5), nn.BatchNorm1d(5 if not bn_first else 6), (6,)
    elif layer == "conv":
        aff, bn, shape = nn.Conv2d(3, 4, 3, 2, 1), nn.BatchNorm2d(4 if not bn_first else 3), \
            (3, 6, 6)
    else:
        aff, bn, shape = nn.ConvTranspose2d(4, 6, 3, 2, 1, 1, groups=2), \
            nn.BatchNorm2d(6 if not bn_first else 4), (4, 3, 3)
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2.0)
    bn.weight.data.uniform_(-2, 2)
    bn.bias.data.uniform_(-1, 1)
    seq = (nn.Sequential(bn, aff) if bn_first else nn.Sequential(aff, bn)).double().eval()
    amap = affine_from_modules(list(seq), shape)
    # after the layer BN is folded into its weights; before it the chain is kept
    assert isinstance(amap, ComposedMap) == bn_first
    assert amap.kind == ("BatchNorm+" if bn_first else "") + type(aff).__name__
    x = torch.randn(5, *shape, dtype=F64)
    with torch.no_grad():
        assert torch.allclose(amap.apply(x), seq(x), rtol=1e-12, atol=1e-12)
        want = copy.deepcopy(seq).float()(x.float())
    assert torch.allclose(amap.to(dtype=torch.float32).apply(x.float()), want, atol=1e-5)
    assert _adjoint_rel_err(amap, F64) <= 1e-12
    sigma = float(torch.linalg.matrix_norm(_matrix_of_module(seq, shape), ord=2))
    assert amap.norm() == pytest.approx(sigma, rel=1e-10)


def test_composed_map_chain_adjoint_bias_and_simplification():
    torch.manual_seed(4)
    seq = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.AvgPool2d(2), nn.Flatten(),
                        nn.Identity(), nn.Unflatten(1, (8, 4)), nn.Flatten(), nn.Linear(32, 3)
                        ).double()
    amap = affine_from_modules(list(seq), (1, 8, 8))
    assert isinstance(amap, ComposedMap)
    # identity dropped, Flatten-Unflatten-Flatten merged into one reshape
    assert [type(m) for m in amap.maps] == [Conv2dMap, AvgPool2dMap, ReshapeMap, LinearMap]
    x = torch.randn(3, 1, 8, 8, dtype=F64)
    with torch.no_grad():
        assert torch.allclose(amap.apply(x), seq(x), atol=1e-12)
        assert torch.allclose(amap.bias, seq(torch.zeros(1, 1, 8, 8, dtype=F64))[0], atol=1e-14)
    assert torch.allclose(amap.linear(x) + amap.bias, amap.apply(x), atol=1e-12)
    assert _adjoint_rel_err(amap, F64) <= 1e-12
    sigma = float(torch.linalg.matrix_norm(_matrix_of_module(seq, (1, 8, 8)), ord=2))
    assert amap.norm() == pytest.approx(sigma, rel=1e-10)
    assert "Conv2d 1->2" in amap.describe() and "Linear 32->3" in amap.describe()
    assert isinstance(compose([IdentityMap((3,)), IdentityMap((3,))]), IdentityMap)
    # zero padding in front of a convolution becomes the convolution's (asymmetric) pads
    pad_conv = nn.Sequential(nn.ZeroPad2d((0, 1, 2, 1)), nn.Conv2d(2, 3, 3, stride=2)).double()
    folded = affine_from_modules(list(pad_conv), (2, 6, 7))
    assert isinstance(folded, Conv2dMap) and folded.pads == (2, 1, 0, 1)
    x = torch.randn(2, 2, 6, 7, dtype=F64)
    with torch.no_grad():
        assert torch.allclose(folded.apply(x), pad_conv(x), atol=1e-12)
    assert _adjoint_rel_err(folded, F64) <= 1e-12
    assert isinstance(compose([ReshapeMap((2, 3), (6,)), ReshapeMap((6,), (2, 3))]), IdentityMap)


def test_describe_strings():
    w = torch.zeros(8, 1, 4, 4)
    assert Conv2dMap(w, None, (1, 28, 28), 2, 1).describe() == "Conv2d 1->8, k=4, s=2, p=1"
    assert ConvTranspose2dMap(torch.zeros(16, 8, 4, 4), None, (16, 7, 7), 2, 1).describe() == \
        "ConvTranspose2d 16->8, k=4, s=2, p=1"
    assert LinearMap(torch.zeros(300, 784), None).describe() == "Linear 784->300"
    assert AvgPool2dMap((1, 4, 4), 2).describe() == "AvgPool2d k=2, s=2"
    assert AdaptiveAvgPool2dMap((1, 7, 7), 1).out_shape == (1, 1, 1)


def test_refusals_and_shape_errors():
    with pytest.raises(UnsupportedLayerError,
                       match=r"padding_mode='reflect'.*padding_mode='zeros'"):
        affine_map_of_module(nn.Conv2d(1, 2, 3, padding=1, padding_mode="reflect"), (1, 5, 5),
                             name="enc.0")
    with pytest.raises(UnsupportedLayerError, match=r"'drop'.*model\.eval\(\)"):
        affine_map_of_module(nn.Dropout(0.2).train(), (4,), name="drop")
    with pytest.raises(UnsupportedLayerError, match=r"'bn'.*training mode.*model\.eval\(\)"):
        affine_map_of_module(nn.BatchNorm1d(4).train(), (4,), name="bn")
    with pytest.raises(UnsupportedLayerError, match=r"track_running_stats=False"):
        affine_map_of_module(nn.BatchNorm1d(4, track_running_stats=False).eval(), (4,))
    with pytest.raises(UnsupportedLayerError, match="batch dimension"):
        affine_map_of_module(nn.Flatten(0), (2, 3))
    with pytest.raises(UnsupportedLayerError, match="not an affine layer"):
        affine_map_of_module(nn.ReLU(), (3,), require=True)
    assert affine_map_of_module(nn.ReLU(), (3,)) is None
    with pytest.raises(ShapeMismatchError, match="last dim must be 5"):
        LinearMap(torch.zeros(2, 5), None, (4,))
    with pytest.raises(ShapeMismatchError, match="input channels"):
        Conv2dMap(torch.zeros(2, 3, 3, 3), None, (2, 5, 5))
    with pytest.raises(ShapeMismatchError, match="Cannot chain"):
        ComposedMap([LinearMap(torch.zeros(2, 3), None), LinearMap(torch.zeros(2, 3), None)])


def test_pad_and_scale_shift_maps_directly():
    pad = PadMap((1, 3, 3), (1, 0, 2, 1))
    assert pad.out_shape == (1, 6, 4)
    x = torch.randn(2, 1, 3, 3, dtype=F64)
    assert torch.equal(pad.adjoint(pad.linear(x)), x)
    ss = ScaleShiftMap((2, 3), torch.tensor([[1.0], [-4.0]], dtype=F64), None)
    assert ss.norm() == 4.0
    assert ss.apply(torch.ones(1, 2, 3, dtype=F64))[0, 1, 0] == -4.0


def test_large_map_uses_lanczos():
    """A 3x48x48 -> 8x48x48 convolution is above the exact-size limit."""
    torch.manual_seed(5)
    conv = nn.Conv2d(3, 8, 3, padding=1)
    amap = affine_map_of_module(conv, (3, 48, 48))
    assert min(amap.in_numel, amap.out_numel) > affine_base.EXACT_MAX_SIDE
    est = amap.norm()
    assert amap.norm_method == "lanczos"
    # the norm of a 'same' convolution is at most the max over frequencies of the symbol
    # (periodic bound) and at least its value at interior-supported test images: compare with
    # the exact norm of the same conv on a smaller image, which cannot be larger.
    small = affine_map_of_module(conv, (3, 16, 16)).norm()
    w = conv.weight.detach().double()
    symbol = torch.fft.fft2(w, s=(64, 64))  # (8, 3, 64, 64)
    periodic = float(torch.linalg.matrix_norm(symbol.permute(2, 3, 0, 1), ord=2).max())
    assert small * (1 - 1e-6) <= est <= periodic * 1.01 * (1 + 1e-6)
