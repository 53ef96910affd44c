"""Softmax as a proximal map (MATH.md §2.2-2.4) and the dilogarithm Li2 behind softplus.

References: SLSQP on the simplex for the argmins, the KKT conditions of the prox, the KL
divergence for B, the variational inequality for the simplex projection, and
scipy.special.spence / mpmath.polylog for Li2.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from scipy.special import spence, xlogy

from lbi_engine.activations import li2, make_activation
from lbi_engine.errors import InputError

F64 = torch.float64
F32 = torch.float32
T_VALUES = (0.1, 0.5, 0.9, 1.0, 2.0, 5.0)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().numpy().reshape(-1)


# ----- softmax ------------------------------------------------------------------------------
def _simplex_argmin(f, n: int, x0: np.ndarray) -> np.ndarray:
    res = minimize(f, x0, method="SLSQP", bounds=[(0, 1)] * n,
                   constraints=[{"type": "eq", "fun": lambda u: u.sum() - 1}],
                   options={"ftol": 1e-15, "maxiter": 500})
    return res.x


def _softmax_psi_ref(u: np.ndarray) -> float:
    return float(np.sum(xlogy(u, u)) - 0.5 * np.sum(u * u))


def test_softmax_sigma_conjugate_and_prox_match_slsqp():
    act = make_activation("softmax")
    rng = np.random.default_rng(7)
    n = 4
    err_sigma = err_conj = err_prox = err_kkt = 0.0
    for trial in range(8):
        z = rng.normal(0, 2, n)
        y = _simplex_argmin(lambda u, z=z: 0.5 * np.sum((u - z) ** 2) + _softmax_psi_ref(u), n,
                            np.full(n, 1 / n))
        sig = _np(act.sigma(torch.tensor(z[None], dtype=F64)))
        err_sigma = max(err_sigma, np.abs(sig - y).max())
        sup = z @ y - 0.5 * y @ y - _softmax_psi_ref(y)
        err_conj = max(err_conj, abs(float(act.conjugate(torch.tensor(z[None]))) - sup))
        for t in T_VALUES[trial % 3::3]:
            u_ref = _simplex_argmin(
                lambda u, z=z, t=t: 0.5 * np.sum((u - z) ** 2) + t * _softmax_psi_ref(u), n, sig)
            u = act.prox(torch.tensor(z[None], dtype=F64), t)
            err_prox = max(err_prox, np.abs(_np(u) - u_ref).max())
            # KKT: (1-t) u_i + t log u_i + t + mu = v_i with one mu for all i (exact check)
            lhs = _np((1 - t) * u + t * torch.log(u) + t) - z
            err_kkt = max(err_kkt, np.ptp(lhs))
    assert err_sigma < 1e-6 and err_prox < 1e-6
    assert err_conj < 1e-9 and err_kkt < 1e-12


def test_softmax_bregman_is_kl_and_its_properties():
    act = make_activation({"name": "softmax", "dim": 1})
    g = torch.Generator().manual_seed(8)
    x = torch.softmax(3 * torch.randn(50, 5, generator=g, dtype=F64), dim=1)
    x[0] = torch.tensor([1.0, 0, 0, 0, 0], dtype=F64)  # 0 log 0 = 0
    z = 4 * torch.randn(50, 5, generator=g, dtype=F64)
    p = torch.softmax(z, 1)
    kl = torch.sum(torch.xlogy(x, x) - x * torch.log(p), dim=1)
    b = act.bregman(x, z)
    assert (b - kl).abs().max() < 1e-13
    assert (b - 0.5 * ((act.sigma(z) - x) ** 2).sum(1)).min() >= -1e-14
    assert act.bregman(act.sigma(z), z).abs().max() <= 1e-12
    conj = act.conjugate(z)
    ident = (z * p).sum(1) - 0.5 * (p * p).sum(1) - act.psi(p)
    assert (conj - ident).abs().max() < 1e-13
    # FD of the gradient
    h, k = 1e-5, torch.randn(50, 5, generator=g, dtype=F64)
    fd = (act.bregman(x, z + h * k) - act.bregman(x, z - h * k)) / (2 * h)
    assert (fd - (act.bregman_grad_z(x, z) * k).sum(1)).abs().max() < 1e-8
    # outside the simplex: infinite (sum != 1 or a negative entry)
    bad = torch.tensor([[0.5, 0.6, 0, 0, 0], [1.1, -0.1, 0, 0, 0]], dtype=F64)
    assert torch.isinf(act.bregman(bad, z[:2])).all() and not act.in_domain(bad).any()
    # float32 sums that miss 1 by round-off still count
    x32 = torch.softmax(10 * torch.randn(50, 1000, generator=g), dim=1)
    z32 = torch.randn(50, 1000, generator=g)
    assert torch.isfinite(act.bregman(x32, z32)).all()


def test_softmax_on_channels_per_pixel_and_projection():
    act = make_activation("softmax")
    g = torch.Generator().manual_seed(9)
    z = torch.randn(2, 3, 4, 5, generator=g, dtype=F64)
    s = act.sigma(z)
    assert torch.allclose(s.sum(1), torch.ones(2, 4, 5, dtype=F64))
    b = act.bregman(s, z)
    assert b.shape == (2,) and b.abs().max() < 1e-12
    u = act.prox(z, 0.4)
    assert torch.allclose(u.sum(1), torch.ones(2, 4, 5, dtype=F64), atol=1e-14)
    assert torch.allclose(u[:, :, 1, 2], act.prox(z[:, :, 1, 2], 0.4), atol=1e-14)
    per_sample = act.prox(z, torch.tensor([0.4, 3.0], dtype=F64))
    assert torch.allclose(per_sample[0], u[0], atol=1e-14)
    assert torch.allclose(per_sample[1], act.prox(z[1:], 3.0)[0], atol=1e-14)
    # projection: on the simplex and the variational inequality <x - p, q - p> <= 0
    x = 2 * torch.randn(6, 7, generator=g, dtype=F64)
    p = act.project(x)
    assert act.in_domain(p, atol=1e-14).all()
    q = torch.softmax(3 * torch.randn(200, 6, 7, generator=g, dtype=F64), dim=2)
    assert (((x - p) * (q - p)).sum(2)).max() < 1e-12
    assert (act.project(s) - s).abs().max() < 1e-15
    with pytest.raises(InputError, match="dim"):
        make_activation({"name": "softmax", "dim": 3}).sigma(torch.zeros(2, 3))


def test_softmax_float32_and_extreme_prox():
    act = make_activation("softmax")
    v = torch.tensor([[0.0, 50.0, -50.0, 1.0], [1e3, -1e3, 0, 0], [0, 0, 0, 0]], dtype=F64)
    for t in (0.01, 0.5, 2.0, 50.0):
        u64, u32 = act.prox(v, t), act.prox(v.float(), t)
        assert torch.isfinite(u32).all() and (u32.double() - u64).abs().max() < 1e-6
        lhs = (1 - t) * u64 + t * torch.log(u64) - v
        for row, u_row in zip(lhs, u64, strict=True):  # one mu per row where u > 0
            live = row[u_row > 1e-300]
            assert float(live.max() - live.min()) < 1e-12 * (1 + float(v.abs().max()))


# ----- Li2 ----------------------------------------------------------------------------------
def test_li2_against_scipy_spence():
    u = np.concatenate([-np.logspace(-3, 30, 400), np.linspace(-1.5, 1, 501),
                        1 - np.logspace(-17, -0.3, 200), np.logspace(-3, 0, 100)])
    u = u[u != 0]
    ref = spence(1 - u)
    got = _np(li2(torch.tensor(u, dtype=F64)))
    rel = np.abs(got - ref) / np.abs(ref)
    # spence(1 - u) itself loses digits to the rounding of 1 - u for small |u|
    assert rel[np.abs(u) >= 0.05].max() < 5e-15 and rel.max() < 2e-13
    mpmath = pytest.importorskip("mpmath")
    exact = np.array([float(mpmath.polylog(2, float(a))) for a in u[::3]])
    assert (np.abs(got[::3] - exact) / np.abs(exact)).max() < 2e-15
    tiny = np.concatenate([-np.logspace(-300, -4, 50), np.logspace(-300, -4, 50)])
    series = tiny + tiny**2 / 4 + tiny**3 / 9 + tiny**4 / 16  # spence(1 - u) cancels here
    assert (np.abs(_np(li2(torch.tensor(tiny))) - series) / np.abs(series)).max() < 1e-15
    u32 = torch.tensor(u, dtype=F32)
    ref32 = spence(1 - u32.double().numpy())
    assert (np.abs(_np(li2(u32)) - ref32) / np.maximum(np.abs(ref32), 1e-30)).max() < 1e-6
    assert float(li2(torch.tensor(1.0, dtype=F64))) == pytest.approx(math.pi**2 / 6, abs=1e-16)
    assert torch.isnan(li2(torch.tensor(1.5))).item()
