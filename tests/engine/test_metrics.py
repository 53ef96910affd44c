"""Metrics against hand computations and scikit-image (MATH.md §5.1, §8.3, §8.4)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from lbi_engine.errors import InputError, ShapeMismatchError
from lbi_engine.metrics import (
    discrepancy,
    l2_norm,
    objective_parts,
    psnr,
    ssim,
    symmetric_bregman,
    symmetric_bregman_parts,
    tv_aniso,
    tv_iso,
)
from lbi_engine.operators.finite_differences import div
from lbi_engine.regularisers import make_regulariser
from tests.engine._nets import StandInIdentity, StandInLayer, StandInNet, StandInRelu

F64 = torch.float64


# -- a tiny stand-in for LiftedNetwork (StandInNet, tests/engine/_nets.py) --
def two_layer_net(seed: int = 0) -> StandInNet:
    g = torch.Generator().manual_seed(seed)
    w1, b1 = torch.randn(6, 16, generator=g, dtype=F64) / 4, torch.randn(6, generator=g, dtype=F64)
    w2, b2 = torch.randn(3, 6, generator=g, dtype=F64), torch.randn(3, generator=g, dtype=F64)
    return StandInNet([StandInLayer(w1, b1, StandInRelu(), (4, 4)),
                       StandInLayer(w2, b2, StandInIdentity(), (6,))])


def disc(dtype=F64) -> torch.Tensor:
    u = torch.linspace(-1, 1, 64, dtype=F64)
    uu, vv = torch.meshgrid(u, u, indexing="ij")
    return ((uu**2 + vv**2) <= 0.25).to(dtype)[None]


# -- PSNR --
def test_psnr_hand_computation_and_skimage():
    ref = torch.rand((3, 8, 9), generator=torch.Generator().manual_seed(1), dtype=F64)
    x = ref + 0.1  # MSE = 0.01 -> exactly 20 dB at range 1, 20 + 20 log10(2) at range 2
    assert psnr(x, ref).tolist() == pytest.approx([20.0] * 3, abs=1e-10)
    assert psnr(x, ref, data_range=2.0)[0].item() == pytest.approx(20 + 20 * math.log10(2))
    noisy = (ref + 0.05 * torch.randn(ref.shape, dtype=F64)).clamp(0, 1)
    got = psnr(noisy, ref)
    for b in range(3):
        mse = float(((noisy[b] - ref[b]) ** 2).mean())
        assert got[b].item() == pytest.approx(10 * math.log10(1 / mse), rel=1e-12)
        sk = peak_signal_noise_ratio(ref[b].numpy(), noisy[b].numpy(), data_range=1.0)
        assert got[b].item() == pytest.approx(sk, rel=1e-12)
    f32 = psnr(noisy.float(), ref.float())
    assert f32.dtype == torch.float32 and f32.tolist() == pytest.approx(got.tolist(), abs=1e-4)


def test_psnr_centred_images_pitfall():
    """Centring shifts both images: PSNR with the explicit range 1 is unchanged, skimage's
    inferred range (2 for negative floats) adds 20 log10(2) = 6.02 dB."""
    g = torch.Generator().manual_seed(2)
    ref = torch.rand((1, 28, 28), generator=g, dtype=F64)
    x = (ref + 0.05 * torch.randn(ref.shape, generator=g, dtype=F64)).clamp(0, 1)
    c = 0.1307
    ours = psnr(x - c, ref - c, data_range=1.0).item()
    assert ours == pytest.approx(psnr(x, ref).item(), abs=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inferred = peak_signal_noise_ratio((ref - c)[0].numpy(), (x - c)[0].numpy())
    assert inferred - ours == pytest.approx(20 * math.log10(2), abs=1e-9)  # 6.0206 dB


def test_psnr_identical_and_errors():
    x = torch.rand(2, 4, 4)
    assert psnr(x, x.clone()).tolist() == [math.inf, math.inf]
    with pytest.raises(ShapeMismatchError, match="same shape"):
        psnr(x, x[:, :3])
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(InputError, match="data_range"):
            psnr(x, x, data_range=bad)


# -- SSIM --
def _sk_ssim(a: np.ndarray, b: np.ndarray, **kw) -> float:
    return structural_similarity(a, b, data_range=1.0, gaussian_weights=True, sigma=1.5,
                                 use_sample_covariance=False, **kw)


def test_ssim_matches_skimage_directly():
    g = torch.Generator().manual_seed(3)
    ref = torch.rand((3, 28, 28), generator=g, dtype=F64)
    x = (ref + 0.1 * torch.randn(ref.shape, generator=g, dtype=F64)).clamp(0, 1)
    got = ssim(x, ref)
    for b in range(3):
        assert got[b].item() == pytest.approx(_sk_ssim(x[b].numpy(), ref[b].numpy()), abs=1e-12)
    assert 0.2 < got.min().item() < got.max().item() < 0.95
    assert ssim(ref, ref).tolist() == pytest.approx([1.0] * 3, abs=1e-12)
    # (B, 1, H, W) is the same as (B, H, W); float32 works
    assert ssim(x[:, None], ref[:, None]).tolist() == pytest.approx(got.tolist(), abs=1e-12)
    f32 = ssim(x.float(), ref.float())
    assert f32.dtype == torch.float32 and f32.tolist() == pytest.approx(got.tolist(), abs=1e-5)
    # data_range matters: range 2 makes the stabilising constants larger
    assert ssim(x, ref, data_range=2.0)[0].item() == pytest.approx(
        structural_similarity(x[0].numpy(), ref[0].numpy(), data_range=2.0,
                              gaussian_weights=True, sigma=1.5,
                              use_sample_covariance=False), abs=1e-12)


def test_ssim_multichannel():
    g = torch.Generator().manual_seed(4)
    ref = torch.rand((2, 3, 16, 16), generator=g, dtype=F64)
    x = (ref + 0.1 * torch.randn(ref.shape, generator=g, dtype=F64)).clamp(0, 1)
    got = ssim(x, ref)
    for b in range(2):
        sk = _sk_ssim(x[b].numpy(), ref[b].numpy(), channel_axis=0)
        assert got[b].item() == pytest.approx(sk, abs=1e-12)
        per_channel = np.mean([_sk_ssim(x[b, c].numpy(), ref[b, c].numpy()) for c in range(3)])
        assert got[b].item() == pytest.approx(per_channel, abs=1e-12)


@pytest.mark.parametrize("hw,window", [((5, 5), 5), ((8, 4), 3), ((10, 12), 9), ((3, 7), 3),
                                       ((11, 30), None)])
def test_ssim_small_images_use_the_largest_odd_window(hw, window):
    g = torch.Generator().manual_seed(5)
    ref = torch.rand((1, *hw), generator=g, dtype=F64)
    x = (ref + 0.1 * torch.randn(ref.shape, generator=g, dtype=F64)).clamp(0, 1)
    expected = _sk_ssim(x[0].numpy(), ref[0].numpy(), win_size=window)
    assert ssim(x, ref).item() == pytest.approx(expected, abs=1e-12)
    assert math.isfinite(expected)


def test_ssim_tiny_images_are_nan_and_flat_input_is_refused():
    x = torch.rand(2, 2, 6)
    assert torch.isnan(ssim(x, x)).all() and ssim(x, x).shape == (2,)
    with pytest.raises(InputError, match=r"\(B, H, W\)"):
        ssim(torch.rand(2, 16), torch.rand(2, 16))


# -- norms and TV --
@pytest.mark.parametrize("dtype", [F64, torch.float32])
def test_norm_and_tv_of_the_paper_disc(dtype):
    x = disc(dtype)
    assert l2_norm(x).item() == pytest.approx(math.sqrt(788), rel=1e-6)  # 28.071
    assert round(l2_norm(x).item(), 3) == 28.071
    assert tv_aniso(x).item() == pytest.approx(128.0, abs=1e-4)
    assert round(tv_iso(x).item(), 2) == 116.87
    two = torch.cat([x, 2 * x])  # per sample and 1-homogeneous
    assert tv_iso(two).tolist() == pytest.approx([tv_iso(x).item(), 2 * tv_iso(x).item()])


# -- discrepancy and the lifted objective --
def test_discrepancy_with_a_stand_in_network():
    net = two_layer_net()
    x = torch.randn((2, 16), generator=torch.Generator().manual_seed(6), dtype=F64)
    y_delta = net.forward(x) + torch.tensor([[0.3, 0.0, -0.4], [0.0, 0.0, 0.0]], dtype=F64)
    assert discrepancy(net, x, y_delta).tolist() == pytest.approx([0.5, 0.0], abs=1e-14)
    with pytest.raises(ShapeMismatchError):
        discrepancy(net, x, y_delta[:, :2])


def test_objective_parts_by_hand():
    net = two_layer_net()
    g = torch.Generator().manual_seed(7)
    x0 = torch.rand((2, 4, 4), generator=g, dtype=F64)
    aux = [torch.rand((2, 6), generator=g, dtype=F64)]
    y_delta = torch.randn((2, 3), generator=g, dtype=F64)
    alpha = 0.03
    parts = objective_parts(net, x0, aux, y_delta, "tv", alpha)
    (l1, l2) = net.layers
    for b in range(2):
        z1 = (l1.affine.w @ x0[b].reshape(-1) + l1.affine.b).numpy()
        x1 = aux[0][b].numpy()
        b1 = 0.5 * (x1**2).sum() + 0.5 * (np.maximum(z1, 0) ** 2).sum() - (x1 * z1).sum()
        z2 = (l2.affine.w @ aux[0][b] + l2.affine.b).numpy()
        b2 = 0.5 * ((y_delta[b].numpy() - z2) ** 2).sum()
        img = x0[b].numpy()
        tv = np.sqrt(np.pad(np.diff(img, axis=0), ((0, 1), (0, 0))) ** 2
                     + np.pad(np.diff(img, axis=1), ((0, 0), (0, 1))) ** 2).sum()
        assert parts["bregman"][b].tolist() == pytest.approx([b1, b2], rel=1e-12)
        assert parts["reg"][b].item() == pytest.approx(alpha * tv, rel=1e-12)
        assert parts["total"][b].item() == pytest.approx(b1 + b2 + alpha * tv, rel=1e-12)
    assert parts["bregman"].shape == (2, 2)
    # aux=None: forward states, so the first term vanishes
    fwd = objective_parts(net, x0, None, y_delta, make_regulariser("tv"), alpha)
    assert fwd["bregman"][:, 0].abs().max().item() <= 1e-12
    assert fwd["discrepancy"].tolist() == pytest.approx(
        (net.forward(x0) - y_delta).norm(dim=1).tolist())
    # a violated constraint is +inf whatever alpha is (no 0 * inf = NaN)
    bad = objective_parts(net, x0 - 0.5, None, y_delta, "tv+nonneg", 0.0)
    assert bad["reg"].tolist() == [math.inf, math.inf] and bad["total"][0].item() == math.inf
    with pytest.raises(ShapeMismatchError, match="auxiliary"):
        objective_parts(net, x0, [], y_delta, "tv", alpha)


# -- symmetric Bregman distance --
def test_symmetric_bregman_tv_exact_and_robust_forms():
    g = torch.Generator().manual_seed(8)
    x_true = torch.zeros((2, 12, 12), dtype=F64)
    x_true[:, 3:9, 4:10] = 1.0  # flat regions: q_true uses 0 there
    x_a = x_true + 0.2 * torch.randn(x_true.shape, generator=g, dtype=F64)
    for name in ("tv", "tv-aniso"):
        reg = make_regulariser(name)
        q_a = reg.subgradient(x_a)
        parts = symmetric_bregman_parts(reg, x_a, q_a, x_true)
        assert (parts["total"] - parts["inner"]).abs().max().item() <= 1e-10
        assert parts["bracket_alpha"].min().item() > 0  # (aniso: bracket_true can be exactly 0)
        assert parts["bracket_true"].min().item() >= -1e-12
        explicit = ((x_a - x_true) * (q_a - reg.subgradient(x_true))).flatten(1).sum(1)
        assert symmetric_bregman(name, x_a, q_a, x_true).tolist() == pytest.approx(
            explicit.tolist(), rel=1e-12)
    # robust form: q_a = -div z with z in the dual ball but not a subgradient at x_a
    z = torch.randn((2, 2, 12, 12), generator=g, dtype=F64)
    z = z / z.norm(dim=1, keepdim=True).clamp_min(1.0)
    parts = symmetric_bregman_parts("tv", x_a, -div(z), x_true)
    assert parts["bracket_alpha"].min().item() >= 0 and parts["bracket_true"].min().item() >= 0


def test_symmetric_bregman_quadratic_regularisers():
    g = torch.Generator().manual_seed(9)
    x_a, x_t = (torch.randn((2, 5, 6), generator=g, dtype=F64) for _ in range(2))
    tik = symmetric_bregman_parts("tikhonov", x_a, x_a, x_t)  # q = x: D = ||x_a - x_t||^2
    expected = (x_a - x_t).flatten(1).square().sum(1)
    assert tik["total"].tolist() == pytest.approx(expected.tolist(), rel=1e-12)
    assert tik["bracket_alpha"].tolist() == pytest.approx((expected / 2).tolist(), rel=1e-12)
    reg = make_regulariser("gradient-tikhonov")
    d = x_a - x_t
    gd = np.stack([np.pad(np.diff(d.numpy(), axis=1), ((0, 0), (0, 1), (0, 0))),
                   np.pad(np.diff(d.numpy(), axis=2), ((0, 0), (0, 0), (0, 1)))])
    got = symmetric_bregman(reg, x_a, reg.subgradient(x_a), x_t)
    assert got.tolist() == pytest.approx((gd**2).sum(axis=(0, 2, 3)).tolist(), rel=1e-12)
    zero = torch.zeros_like(x_a)  # R = 0 on the set, so q = 0 and D = 0
    assert symmetric_bregman("nonneg", x_a.abs(), zero, x_t.abs()).abs().max() == 0


def test_symmetric_bregman_accepts_a_shaped_wrapper_on_flat_vectors():
    class Shaped:  # like InversionProblem's ShapedRegulariser: flat network input, image reg
        inner, image_shape = make_regulariser("tv"), (1, 6, 6)

    g = torch.Generator().manual_seed(10)
    x_a, x_t = (torch.rand((2, 1, 6, 6), generator=g, dtype=F64) for _ in range(2))
    q_a = Shaped.inner.subgradient(x_a)
    expected = symmetric_bregman("tv", x_a, q_a, x_t)
    flat = symmetric_bregman(Shaped(), x_a.flatten(1), q_a.flatten(1), x_t.flatten(1))
    assert flat.tolist() == pytest.approx(expected.tolist(), rel=1e-14)
    assert expected.min().item() > 0
