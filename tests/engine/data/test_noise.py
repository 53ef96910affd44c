"""Noise simulation and the noise level delta (MATH.md §6, §7)."""

from __future__ import annotations

import math

import pytest
import torch

from lbi_engine.errors import InputError
from lbi_engine.noise import (
    NoisyData,
    expected_clipped_residual,
    make_noisy_data,
    noise_from_measurement,
    validate_std,
)
from tests.engine._nets import StandInIdentity, StandInLayer, StandInNet, StandInRelu

F64 = torch.float64


# -- a tiny stand-in for LiftedNetwork (StandInNet, tests/engine/_nets.py) --
def make_net(last: str = "relu", dtype=F64) -> StandInNet:
    g = torch.Generator().manual_seed(0)
    w1 = torch.randn(12, 16, generator=g, dtype=F64) / 4
    w2 = torch.randn(30, 12, generator=g, dtype=F64) / 3
    b1, b2 = torch.zeros(12, dtype=F64), torch.full((30,), -0.2, dtype=F64)  # some z < 0
    act = StandInRelu() if last == "relu" else StandInIdentity()
    layers = [StandInLayer(w1.to(dtype), b1.to(dtype), StandInRelu()),
              StandInLayer(w2.to(dtype), b2.to(dtype), act)]
    return StandInNet(layers)


def x_true(dtype=F64) -> torch.Tensor:
    return torch.rand((3, 4, 4), generator=torch.Generator().manual_seed(1), dtype=F64).to(dtype)


def reference_noise(seed: int, shape: tuple[int, ...]) -> torch.Tensor:
    """The documented convention: float64 standard normals from a CPU generator."""
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


# -- simulation --
def test_seeded_reproducibility_and_generator():
    net, x = make_net(), x_true()
    a = make_noisy_data(net, x, 0.05, seed=7)
    b = make_noisy_data(net, x, 0.05, seed=7)
    c = make_noisy_data(net, x, 0.05, seed=8)
    assert torch.equal(a.y_delta, b.y_delta) and not torch.equal(a.y_delta, c.y_delta)
    assert a.seed == 7 and a.std == 0.05
    d = make_noisy_data(net, x, 0.05, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a.y_delta, d.y_delta) and d.seed is None
    r = make_noisy_data(net, x, 0.05)  # random seed, recorded so the draw can be redone
    assert isinstance(r.seed, int)
    assert torch.equal(r.y_delta, make_noisy_data(net, x, 0.05, seed=r.seed).y_delta)
    with pytest.raises(InputError, match="not both"):
        make_noisy_data(net, x, 0.05, seed=1, generator=torch.Generator())
    # float32 network: same noise up to float32 rounding (drawn in float64, then cast)
    f32 = make_noisy_data(make_net(dtype=torch.float32), x.float(), 0.05, seed=7)
    assert f32.y_delta.dtype == torch.float32
    assert (f32.y_delta.double() - a.y_delta).abs().max().item() <= 1e-6


def test_relu_clipping_and_delta_formula():
    net, x = make_net(), x_true()
    std, seed = 0.1, 3
    data = make_noisy_data(net, x, std, seed=seed)
    states = net.forward_states(x)
    z = net.pre_activation(1, states[0])
    y = z.clamp_min(0)
    n = reference_noise(seed, tuple(y.shape))
    assert torch.equal(data.y, y)
    assert torch.equal(data.y_delta, (y + std * n).clamp_min(0))  # projection onto dom = [0, inf)
    assert data.y_delta.min().item() == 0.0 and int((y + std * n < 0).sum()) > 10
    assert torch.equal(data.noise, data.y_delta - y)
    assert data.noise_norm.tolist() == pytest.approx((data.y_delta - y).norm(dim=1).tolist())
    # MATH §7: delta^2 = ½||y_delta - y||^2 + <y_delta, z_->  (z_- = max(-z, 0))
    expected = 0.5 * ((data.y_delta - y) ** 2).sum(1) + (data.y_delta * (-z).clamp_min(0)).sum(1)
    assert data.delta_squared.tolist() == pytest.approx(expected.tolist(), rel=1e-12)
    assert data.delta.tolist() == pytest.approx(expected.sqrt().tolist(), rel=1e-12)
    # the inactive-entry term dominates, as MATH §7 says for the circle experiment
    assert (expected > 2 * 0.5 * ((data.y_delta - y) ** 2).sum(1)).all()
    assert data.simulated


def test_identity_last_layer_delta_is_half_noise_norm_squared():
    net, x = make_net("identity"), x_true()
    std, seed = 0.33, 11
    data = make_noisy_data(net, x, std, seed=seed)
    n = std * reference_noise(seed, (3, 30))
    assert (data.noise - n).abs().max().item() <= 1e-14  # no clipping
    assert data.delta_squared.tolist() == pytest.approx((0.5 * (n**2).sum(1)).tolist(), rel=1e-12)
    assert data.noise_norm.tolist() == pytest.approx(n.norm(dim=1).tolist(), rel=1e-12)
    zero = make_noisy_data(net, x, 0.0, seed=seed)
    assert torch.equal(zero.y_delta, zero.y) and zero.delta.abs().max().item() <= 1e-7


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf, 2e6, "abc", None, [0.1]])
def test_bad_std_is_refused(bad):
    with pytest.raises(InputError, match="std"):
        make_noisy_data(make_net(), x_true(), bad, seed=0)


def test_validate_std_accepts_numbers():
    assert validate_std(0) == 0.0 and validate_std(torch.tensor(0.25)) == 0.25
    assert validate_std(1e6) == 1e6


# -- measured data --
def test_noise_from_measurement():
    y_delta = torch.tensor([[0.0, 0.5, 1.0]], dtype=F64)
    data = noise_from_measurement(y_delta, StandInRelu(), std=0.01)
    assert isinstance(data, NoisyData) and not data.simulated
    assert data.delta is None and data.delta_squared is None and data.noise is None
    assert data.std == 0.01 and data.seed is None and data.y_delta is y_delta
    with pytest.raises(InputError, match="outside the domain"):
        noise_from_measurement(torch.tensor([[-0.1, 0.5]]), StandInRelu())
    assert noise_from_measurement(torch.tensor([[-0.1, 0.5]]), StandInIdentity()).std is None
    with pytest.raises(InputError, match="NaN"):
        noise_from_measurement(torch.tensor([[math.nan]]))


# -- expected residual under clipping (MATH §6) --
@pytest.mark.parametrize("dtype", [F64, torch.float32])
def test_expected_clipped_residual_vs_monte_carlo(dtype):
    s = 0.1
    a = torch.tensor([0.0, 0.5, 1.0, 3.0, 0.2, 2.0, 0.0, 1.5], dtype=F64)
    y = torch.stack([a * s, a.flip(0) * s * 0.5]).repeat(1, 5)  # (2, 40), y >= 0
    got = expected_clipped_residual(y.to(dtype), s)
    assert got.dtype == dtype and got.shape == (2,)
    gen = torch.Generator().manual_seed(12)
    reps = 20_000
    n = torch.randn((reps, *y.shape), generator=gen, dtype=F64)
    mc = ((y + s * n).clamp_min(0) - y).square().sum(-1).mean(0)
    assert (got.double() / mc - 1).abs().max().item() <= 0.01


def test_expected_clipped_residual_limits_and_errors():
    s, m = 0.2, 50
    zeros = torch.zeros((1, m), dtype=F64)  # half the noise is clipped away: s^2 / 2 each
    assert expected_clipped_residual(zeros, s).item() == pytest.approx(m * s * s / 2, rel=1e-14)
    far = torch.full((1, m), 100 * s, dtype=F64)  # no clipping: s^2 each
    assert expected_clipped_residual(far, s).item() == pytest.approx(m * s * s, rel=1e-12)
    assert expected_clipped_residual(far, 0.0).item() == 0.0
    with pytest.raises(InputError, match="negative"):
        expected_clipped_residual(-far, s)
    with pytest.raises(InputError, match="std"):
        expected_clipped_residual(far, -1.0)


def test_expected_clipped_residual_is_finite_for_a_tiny_std() -> None:
    """std 1e-200 made y / std infinite and the formula NaN (inf * 0), which crashed the
    auto-alpha choice of `lbi invert --noise-std 1E-200`; far from 0 each entry is std^2."""
    import torch

    from lbi_engine.noise import expected_clipped_residual

    y = torch.tensor([[0.0, 0.5, 2.0]], dtype=torch.float64)
    tiny = expected_clipped_residual(y, 1e-200)
    assert torch.isfinite(tiny).all() and float(tiny[0]) >= 0.0
    # at a moderate std the large-a limit agrees with the formula: entries 40 std away count 1
    std = 0.01
    exact = expected_clipped_residual(y, std)
    assert float(exact[0]) == pytest.approx(std * std * (0.5 + 1.0 + 1.0), rel=1e-12)


def test_sample_seeds_give_each_sample_its_own_seeds_draw() -> None:
    """A batch with one seed per sample: sample i's noise is the draw of seed s_i alone."""
    from tests.engine._nets import relu_mlp

    net = relu_mlp((16, 12, 8), seed=1)
    x = torch.rand(3, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    batch = make_noisy_data(net, x, 0.2, sample_seeds=[7, 3, 11])
    for i, seed in enumerate((7, 3, 11)):
        alone = make_noisy_data(net, x[i:i + 1], 0.2, seed=seed)
        assert torch.allclose(batch.noise[i], alone.noise[0], rtol=0, atol=1e-15)
        assert torch.allclose(batch.delta[i], alone.delta[0], rtol=1e-12, atol=0)
    with pytest.raises(InputError, match="3 samples but 2 seeds"):
        make_noisy_data(net, x, 0.2, sample_seeds=[1, 2])
