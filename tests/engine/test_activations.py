"""Proximal activations (MATH.md §1-§2), each checked against an independent computation.

References: psi written directly from the table of MATH.md §2.2 in NumPy/SciPy (Li2 via
scipy.special.spence), brute-force argmins (vectorised golden section on the convex
objective; SLSQP on the simplex for softmax), central finite differences, and
torch.nn's own modules for the module mapping.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize, minimize_scalar
from scipy.special import spence, xlogy
from torch import nn

from lbi_engine.activations import (
    ProximalActivation,
    activation_from_module,
    activation_from_onnx,
    li2,
    make_activation,
)
from lbi_engine.errors import InputError, ShapeMismatchError, UnsupportedLayerError

F64 = torch.float64
F32 = torch.float32
T_VALUES = (0.1, 0.5, 0.9, 1.0, 2.0, 5.0)


# ----- NumPy references written from MATH.md §2.2 -----------------------------------------
def _psi_ref(spec: dict, x: np.ndarray) -> np.ndarray:
    """psi(x) for x in the closed domain, straight from the table (no stabilisation)."""
    name = spec["name"]
    if name in ("identity", "relu", "clip"):
        return np.zeros_like(x)
    if name == "leaky_relu":
        a = spec["a"]
        return (1 - a) / (2 * a) * np.minimum(x, 0) ** 2
    if name == "soft_shrink":
        return spec["lam"] * np.abs(x)
    if name == "sigmoid":
        return xlogy(x, x) + xlogy(1 - x, 1 - x) - x**2 / 2
    if name == "tanh":
        return xlogy((1 + x) / 2, 1 + x) + xlogy((1 - x) / 2, 1 - x) - x**2 / 2
    if name == "softplus":
        b = spec["beta"]
        return spence(1 - np.exp(-b * x)) / b**2  # Li2(e^-bx) / b^2
    if name == "elu":
        a = spec["alpha"]
        xn = np.minimum(x, 0)
        return np.where(x > 0, 0.0, xlogy(a + xn, 1 + xn / a) - xn - xn**2 / 2)
    if name == "softsign":
        return -np.abs(x) - np.log(1 - np.abs(x)) - x**2 / 2
    if name == "hard_sigmoid":
        return 2.5 * x**2 - 3 * x
    raise AssertionError(name)


# activation spec, brute-force bracket [lo, hi] within dom psi, kinks of sigma
CASES = [
    ({"name": "identity"}, (-40, 40), ()),
    ({"name": "relu"}, (0, 40), (0.0,)),
    ({"name": "leaky_relu", "a": 0.2}, (-40, 40), (0.0,)),
    ({"name": "leaky_relu", "a": 1.0}, (-40, 40), ()),
    ({"name": "clip", "lo": -1.0, "hi": 2.0}, (-1, 2), (-1.0, 2.0)),
    ({"name": "clip", "lo": 0.0, "hi": 6.0}, (0, 6), (0.0, 6.0)),
    ({"name": "clip", "lo": None, "hi": 1.5}, (-40, 1.5), (1.5,)),
    ({"name": "soft_shrink", "lam": 0.7}, (-40, 40), (-0.7, 0.7)),
    ({"name": "sigmoid"}, (0, 1), ()),
    ({"name": "tanh"}, (-1, 1), ()),
    ({"name": "softplus", "beta": 1.0}, (0, 40), ()),
    ({"name": "softplus", "beta": 2.5}, (0, 40), ()),
    ({"name": "elu", "alpha": 0.8}, (-0.8, 40), (0.0,)),
    ({"name": "elu", "alpha": 1.0}, (-1.0, 40), ()),
    ({"name": "softsign"}, (-1 + 1e-13, 1 - 1e-13), ()),
    ({"name": "hard_sigmoid"}, (0, 1), (-3.0, 3.0)),
]
IDS = [
    "-".join([c[0]["name"]] + [str(v) for k, v in c[0].items() if k != "name"]) for c in CASES
]


def _golden_argmin(f, lo: np.ndarray, hi: np.ndarray, iters: int = 120) -> np.ndarray:
    """Vectorised golden-section search of a convex f on [lo, hi] (elementwise)."""
    g = (math.sqrt(5) - 1) / 2
    a, b = lo.astype(float).copy(), hi.astype(float).copy()
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        left = fc < fd
        a, b = np.where(left, a, c), np.where(left, d, b)
        new = np.where(left, b - g * (b - a), a + g * (b - a))
        fn = f(new)
        c, d = np.where(left, new, d), np.where(left, c, new)
        fc, fd = np.where(left, fn, fd), np.where(left, fc, fn)
    return 0.5 * (a + b)


def _t(a: np.ndarray, dtype=F64) -> torch.Tensor:
    """A (N, 1) tensor: N samples of one element each, so (B,) results are elementwise."""
    return torch.tensor(np.asarray(a, dtype=float).reshape(-1, 1), dtype=dtype)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().numpy().reshape(-1)


def _domain_points(spec: dict, bracket: tuple, n: int, rng: np.random.Generator) -> np.ndarray:
    lo, hi = bracket
    if lo > -40 and hi < 40:
        pts = rng.uniform(lo, hi, n)
    elif lo > -40:
        pts = lo + np.abs(rng.normal(0, 3, n))
    elif hi < 40:
        pts = hi - np.abs(rng.normal(0, 3, n))
    else:
        pts = rng.normal(0, 3, n)
    ends = [v for v in (lo, hi) if abs(v) < 40 and spec["name"] != "softsign"]
    return np.concatenate([pts, ends])


@pytest.fixture(params=range(len(CASES)), ids=IDS)
def case(request):
    spec, bracket, kinks = CASES[request.param]
    return make_activation(spec), spec, bracket, kinks


# ----- sigma, conjugate and prox against brute force --------------------------------------
def test_sigma_and_conjugate_match_brute_force(case):
    act, spec, (lo, hi), _ = case
    z = np.concatenate([np.linspace(-8, 8, 81), np.random.default_rng(0).normal(0, 3, 40)])
    obj = lambda y: 0.5 * (y - z) ** 2 + _psi_ref(spec, y)  # noqa: E731
    y_star = _golden_argmin(obj, np.full_like(z, lo), np.full_like(z, hi))
    sig = _np(act.sigma(_t(z)))
    assert np.abs(sig - y_star).max() < 2e-7
    # numerical sup: F*(z) = z y* - y*^2/2 - psi(y*) (value is second-order accurate)
    sup = z * y_star - 0.5 * y_star**2 - _psi_ref(spec, y_star)
    conj = _np(act.conjugate(_t(z)))
    assert np.abs(conj - sup).max() < 1e-10
    # identity 2 of MATH.md §1.2 with the module's own psi
    ident = _np(_t(z) * act.sigma(_t(z)) - 0.5 * act.sigma(_t(z)) ** 2) - _np(act.psi(act.sigma(_t(z))))
    assert np.abs(conj - ident).max() < 1e-12
    # psi itself against the table formula at domain points
    x = _domain_points(spec, (lo, hi), 200, np.random.default_rng(1))
    assert np.allclose(_np(act.psi(_t(x))), _psi_ref(spec, x), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("t", T_VALUES)
def test_prox_matches_brute_force(case, t):
    act, spec, (lo, hi), _ = case
    v = np.linspace(-6, 6, 61)
    u_star = _golden_argmin(lambda u: 0.5 * (u - v) ** 2 + t * _psi_ref(spec, u),
                            np.full_like(v, lo), np.full_like(v, hi))
    u = _np(act.prox(_t(v), t))
    assert np.abs(u - u_star).max() < 2e-7


def test_prox_fixed_point_residual_on_a_wide_range(case):
    # u = prox_{t psi}(v) iff u = sigma(zeta) with t zeta + (1 - t) u = v (MATH.md §2.4):
    # an exact check of the root solver that needs only sigma.
    act, spec, _, _ = case
    v = torch.cat([torch.linspace(-300, 300, 301, dtype=F64), torch.logspace(-8, 3, 12, dtype=F64)])
    for t in (0.01, 0.3, 1.0, 3.0, 100.0):
        u = act.prox(v.reshape(-1, 1), t)
        zeta = (v.reshape(-1, 1) - (1 - t) * u) / t
        assert (act.sigma(zeta) - u).abs().max() < 1e-12 * (1 + v.abs().max())


def test_prox_accepts_per_sample_tensor_step(case):
    act = case[0]
    v = torch.linspace(-3, 3, 12, dtype=F64).reshape(3, 4)
    t = torch.tensor([0.2, 1.0, 4.0], dtype=F64)
    got = act.prox(v, t)
    want = torch.stack([act.prox(v[i:i + 1], float(t[i]))[0] for i in range(3)])
    assert (got - want).abs().max() < 1e-13


# ----- the Bregman loss ---------------------------------------------------------------------
def test_bregman_properties(case):
    act, spec, bracket, _ = case
    rng = np.random.default_rng(2)
    x = _domain_points(spec, bracket, 1000, rng)
    z = np.concatenate([rng.normal(0, 4, x.size - 6), [-40, -20, -1e-9, 1e-9, 20, 40]])
    xt, zt = _t(x), _t(z)
    b = _np(act.bregman(xt, zt))
    sig = _np(act.sigma(zt))
    assert np.isfinite(b).all() and b.min() >= 0
    # B >= |sigma(z) - x|^2 / 2 (MATH.md §1.2 fact 3)
    assert (b - 0.5 * (sig - x) ** 2).min() >= -1e-12 * (1 + np.abs(z).max())
    # closed form equals 1/2 x^2 + psi(x) + F*(z) - xz with the table's psi
    plain = 0.5 * x**2 + _psi_ref(spec, x) + _np(act.conjugate(zt)) - x * z
    assert np.allclose(b, np.maximum(plain, 0), rtol=1e-9, atol=1e-9)
    # B(sigma(z), z) = 0
    zz = _t(np.linspace(-20, 20, 401))
    assert act.bregman(act.sigma(zz), zz).abs().max() <= 1e-12


def test_bregman_is_infinite_outside_the_domain(case):
    act, spec, (lo, hi), _ = case
    bad = [v for v in (lo - 0.1 if lo > -40 else None, hi + 0.1 if hi < 40 else None)
           if v is not None]
    if spec["name"] == "softsign":
        bad += [-1.0, 1.0]
    if not bad:
        pytest.skip("dom psi is all of R")
    x, z = _t(bad), _t(np.zeros(len(bad)))
    assert torch.isinf(act.bregman(x, z)).all() and torch.isinf(act.psi(x)).all()
    assert not act.in_domain(x).any()


def test_bregman_grad_z_matches_finite_differences(case):
    act, spec, bracket, kinks = case
    rng = np.random.default_rng(3)
    x = _domain_points(spec, bracket, 300, rng)
    z = rng.normal(0, 4, x.size)
    for k in kinks:  # B is C^1 but not C^2 at kinks of sigma: keep FD stencils away
        z = np.where(np.abs(z - k) < 1e-3, z + 2e-3, z)
    h = 1e-5
    xt = _t(x)
    fd = (_np(act.bregman(xt, _t(z + h))) - _np(act.bregman(xt, _t(z - h)))) / (2 * h)
    grad = _np(act.bregman_grad_z(xt, _t(z)))
    assert np.abs(fd - grad).max() < 1e-7


def test_float32_is_finite_and_agrees_with_float64(case):
    act, spec, bracket, _ = case
    rng = np.random.default_rng(4)
    x = _domain_points(spec, bracket, 400, rng).astype(np.float32).astype(float)
    z = np.concatenate([rng.normal(0, 4, x.size - 2), [-30, 30]]).astype(np.float32).astype(float)
    scale = 1 + x**2 + z**2
    for fn, args in (("sigma", (z,)), ("conjugate", (z,)), ("psi", (x,)), ("bregman", (x, z)),
                     ("bregman_grad_z", (x, z))):
        r64 = _np(getattr(act, fn)(*[_t(a) for a in args]))
        r32 = _np(getattr(act, fn)(*[_t(a, F32) for a in args]))
        assert np.isfinite(r32).all(), fn
        assert (np.abs(r32 - r64) / scale).max() < 2e-6, fn
    for t in (0.1, 1.0, 5.0):
        r64, r32 = _np(act.prox(_t(z), t)), _np(act.prox(_t(z, F32), t))
        assert np.isfinite(r32).all() and (np.abs(r32 - r64) / (1 + np.abs(z))).max() < 2e-6


@pytest.mark.parametrize("dtype", [F32, F64])
def test_extreme_inputs_give_no_nan(case, dtype):
    act, spec, (lo, hi), _ = case
    xs = [v for v in (lo, hi, 0.5 * (lo + hi)) if abs(v) < 40] or [0.0]
    if spec["name"] == "softsign":
        xs = [-0.999, 0.0, 0.999]
    zs = [-1e4, -50.0, 0.0, 50.0, 1e4]
    x = torch.tensor([a for a in xs for _ in zs], dtype=dtype).reshape(-1, 1)
    z = torch.tensor([b for _ in xs for b in zs], dtype=dtype).reshape(-1, 1)
    for out in (act.bregman(x, z), act.conjugate(z), act.sigma(z), act.prox(z, 0.3),
                act.psi(x)):
        assert torch.isfinite(out).all()
    huge = torch.tensor([[-1e30], [1e30]], dtype=dtype)
    assert not torch.isnan(act.bregman(x[:2], huge)).any()
    assert not torch.isnan(act.prox(huge, 0.3)).any()


def test_per_sample_reduction_and_shapes(case):
    act, spec, bracket, _ = case
    rng = np.random.default_rng(5)
    x = _domain_points(spec, bracket, 3 * 2 * 4 * 5, rng)[: 3 * 2 * 4 * 5].reshape(3, 2, 4, 5)
    z = rng.normal(0, 3, x.shape)
    xt, zt = torch.tensor(x, dtype=F64), torch.tensor(z, dtype=F64)
    for fn, args, flat in (("bregman", (xt, zt), (x, z)), ("psi", (xt,), (x,)),
                           ("conjugate", (zt,), (z,))):
        out = getattr(act, fn)(*args)
        assert out.shape == (3,)
        per_elem = _np(getattr(act, fn)(*[_t(a) for a in flat])).reshape(3, -1).sum(1)
        assert np.allclose(_np(out), per_elem, rtol=1e-12, atol=1e-12)
    assert act.sigma(zt).shape == zt.shape and act.prox(zt, 0.5).shape == zt.shape
    assert act.in_domain(xt).tolist() == [True] * 3
    if bracket[0] > -40:  # one bad element makes only its own sample infinite
        xt[1, 0, 0, 0] = bracket[0] - 1.0
        b = act.bregman(xt, zt)
        assert torch.isinf(b[1]) and torch.isfinite(b[[0, 2]]).all()
        assert act.in_domain(xt).tolist() == [True, False, True]
        assert torch.isfinite(act.bregman(act.project(xt), zt)).all()


def test_domain_tolerance_applies_to_closed_bounds_only():
    x = torch.tensor([[-1e-8], [-1e-3]], dtype=F64)
    b = make_activation("relu").bregman(x, torch.zeros_like(x))
    assert torch.isfinite(b[0]) and torch.isinf(b[1])
    s = make_activation("softsign")
    assert torch.isinf(s.bregman(torch.tensor([[1.0]], dtype=F64), torch.zeros(1, 1, dtype=F64)))
    assert torch.isfinite(s.psi(s.project(torch.tensor([[1.0], [-3.0]], dtype=F32)))).all()


def test_bregman_checks_shapes_and_types():
    act = make_activation("sigmoid")
    with pytest.raises(ShapeMismatchError, match=r"\(2, 3\).*\(2, 4\)"):
        act.bregman(torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(InputError, match="batch"):
        act.psi(torch.tensor(0.5))
    with pytest.raises(InputError, match="floating"):
        act.bregman(torch.zeros(2, 3, dtype=torch.int64), torch.zeros(2, 3))
    for bad_t in (0.0, -1.0, math.inf, torch.tensor([1.0, -1.0])):
        with pytest.raises(InputError, match="t"):
            act.prox(torch.zeros(2, 3), bad_t)


def test_closed_form_tanh_and_sigmoid_relation():
    rng = np.random.default_rng(6)
    x, z = rng.uniform(-1, 1, 500), rng.normal(0, 5, 500)
    bt = make_activation("tanh").bregman(_t(x), _t(z))
    bs = make_activation("sigmoid").bregman(_t((1 + x) / 2), _t(2 * z))
    assert (bt - bs).abs().max() < 1e-14


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


def test_golden_section_helper_agrees_with_scipy_brent():
    # guards the brute-force reference itself
    spec = {"name": "softplus", "beta": 1.0}
    z = np.array([-3.0, 0.2, 4.0])
    gold = _golden_argmin(lambda y: 0.5 * (y - z) ** 2 + _psi_ref(spec, y), np.zeros(3),
                          np.full(3, 40.0))
    for zi, gi in zip(z, gold, strict=True):
        r = minimize_scalar(lambda y, zi=zi: 0.5 * (y - zi) ** 2 + _psi_ref(spec, np.array(y)),
                            bounds=(0, 40), method="bounded", options={"xatol": 1e-12})
        assert abs(r.x - gi) < 1e-7


# ----- registry -----------------------------------------------------------------------------
@pytest.mark.parametrize("spec", [c[0] for c in CASES] + [{"name": "softmax", "dim": -1}],
                         ids=IDS + ["softmax--1"])
def test_spec_round_trip(spec):
    act = make_activation(spec)
    assert isinstance(act, ProximalActivation)
    assert act.spec()["name"] == spec["name"]
    again = make_activation(act.spec())
    assert again == act and again.spec() == act.spec() and hash(again) == hash(act)
    assert make_activation(act) is act


def test_names_aliases_and_defaults():
    assert make_activation("relu6").spec() == {"name": "clip", "lo": 0.0, "hi": 6.0}
    assert make_activation("HardTanh").spec() == {"name": "clip", "lo": -1.0, "hi": 1.0}
    assert make_activation("leaky-relu").spec() == {"name": "leaky_relu", "a": 0.01}
    assert make_activation({"name": "softshrink", "lam": 0.3}).spec() == {
        "name": "soft_shrink", "lam": 0.3}
    assert make_activation("softmax").spec() == {"name": "softmax", "dim": 1}
    assert make_activation("elu").lower == -1.0 and make_activation("clip").upper == 1.0
    assert make_activation("sigmoid") != make_activation("tanh")


@pytest.mark.parametrize("spec, pattern", [
    ({"name": "leaky_relu", "a": 1.5}, r"0 < a <= 1"),
    ({"name": "leaky_relu", "a": -0.1}, r"non-monotone"),
    ({"name": "leaky_relu", "a": 0.0}, r"'relu'"),
    ({"name": "elu", "alpha": 1.5}, r"0 < alpha <= 1"),
    ({"name": "clip", "lo": 2.0, "hi": 1.0}, r"lo=2.0 must be < hi=1.0"),
    ({"name": "soft_shrink", "lam": 0.0}, r"lam=0.0 must be > 0"),
    ({"name": "softplus", "beta": -1}, r"beta=-1.0 must be > 0"),
    ({"name": "softmax", "dim": 0}, r"batch"),
    ({"name": "leaky_relu", "a": "x"}, r"not a number"),
    ({"name": "relu", "a": 1}, r"takes no parameters; remove a"),
    ({"name": "clip", "low": 1}, r"takes only lo, hi; remove low"),
    ({"name": "gelu"}, r"unknown activation 'gelu'; choose one of"),
    ({"a": 1}, r"no 'name'"),
    (3, r"expected a name or a dict"),
])
def test_make_activation_rejects_bad_specs(spec, pattern):
    with pytest.raises(InputError, match=pattern):
        make_activation(spec)


# ----- torch modules and ONNX ops -----------------------------------------------------------
@pytest.mark.parametrize("module, spec", [
    (nn.Identity(), {"name": "identity"}),
    (nn.ReLU(), {"name": "relu"}),
    (nn.LeakyReLU(0.2), {"name": "leaky_relu", "a": 0.2}),
    (nn.LeakyReLU(0.0), {"name": "relu"}),
    (nn.Hardtanh(), {"name": "clip", "lo": -1.0, "hi": 1.0}),
    (nn.Hardtanh(-2.0, 0.5), {"name": "clip", "lo": -2.0, "hi": 0.5}),
    (nn.ReLU6(), {"name": "clip", "lo": 0.0, "hi": 6.0}),
    (nn.Softshrink(0.3), {"name": "soft_shrink", "lam": 0.3}),
    (nn.Sigmoid(), {"name": "sigmoid"}),
    (nn.Tanh(), {"name": "tanh"}),
    (nn.Softplus(), {"name": "softplus", "beta": 1.0}),
    (nn.Softplus(beta=2.0), {"name": "softplus", "beta": 2.0}),
    (nn.ELU(0.5), {"name": "elu", "alpha": 0.5}),
    (nn.ELU(), {"name": "elu", "alpha": 1.0}),
    (nn.CELU(1.0), {"name": "elu", "alpha": 1.0}),
    (nn.Softsign(), {"name": "softsign"}),
    (nn.Hardsigmoid(), {"name": "hard_sigmoid"}),
    (nn.Softmax(dim=1), {"name": "softmax", "dim": 1}),
    (nn.Softmax(dim=-1), {"name": "softmax", "dim": -1}),
    (nn.Threshold(0.5, 0.5), {"name": "clip", "lo": 0.5, "hi": None}),
    (nn.Threshold(0.0, 0.0), {"name": "relu"}),
    (nn.PReLU(init=0.3), {"name": "leaky_relu", "a": pytest.approx(0.3)}),
    (nn.RReLU(0.1, 0.3).eval(), {"name": "leaky_relu", "a": pytest.approx(0.2)}),
])
def test_activation_from_module_maps_and_computes_the_same(module, spec):
    act = activation_from_module(module)
    assert act.spec() == spec
    z = torch.linspace(-10, 10, 2001, dtype=F64).reshape(1, -1)
    with torch.no_grad():
        want = module.double()(z)
    assert (act.sigma(z) - want).abs().max() < 1e-12


def test_softmax2d_maps_to_channel_softmax():
    act = activation_from_module(nn.Softmax2d())
    z = torch.randn(2, 3, 4, 5, dtype=F64)
    assert (act.sigma(z) - nn.Softmax2d()(z)).abs().max() < 1e-15


@pytest.mark.parametrize("module", [nn.Linear(3, 2), nn.Conv2d(1, 2, 3), nn.Flatten(),
                                    nn.Dropout(), nn.MaxPool2d(2), nn.BatchNorm1d(3)])
def test_activation_from_module_returns_none_for_other_layers(module):
    assert activation_from_module(module) is None


@pytest.mark.parametrize("module, needles", [
    (nn.GELU(), ["not monotone", "-0.170", "1.129", "ReLU, softplus or ELU"]),
    (nn.SiLU(), ["not monotone", "-0.278", "1.0998", "ReLU or softplus"]),
    (nn.Mish(), ["not monotone", "-0.309", "1.089", "softplus"]),
    (nn.Hardswish(), ["not monotone", "1.5", "ReLU6"]),
    (nn.SELU(), ["1.0507", "1.758", "not 1-Lipschitz", "ELU with alpha <= 1"]),
    (nn.ELU(alpha=2.0), ["alpha = 2.0 > 1", "not 1-Lipschitz", "0 < alpha <= 1"]),
    (nn.ELU(alpha=-0.5), ["not monotone", "0 < alpha <= 1"]),
    (nn.LeakyReLU(1.5), ["a = 1.5 > 1", "not 1-Lipschitz", "0 < a <= 1"]),
    (nn.LeakyReLU(-0.2), ["a = -0.2 < 0", "not monotone", "0 < a <= 1"]),
    (nn.Hardshrink(), ["discontinuous", "nonconvex", "Softshrink"]),
    (nn.PReLU(num_parameters=3), ["3 learnable slopes", "LeakyReLU"]),
    (nn.PReLU(init=1.5), ["a = 1.5 > 1", "LeakyReLU"]),
    (nn.Threshold(0.5, 0.0), ["discontinuous", "value != threshold", "ReLU"]),
    (nn.CELU(alpha=2.0), ["is a proximal map", "does not implement", "ELU"]),
    (nn.Tanhshrink(), ["not elementary", "softsign"]),
    (nn.LogSigmoid(), ["does not implement", "softplus"]),
    (nn.LogSoftmax(dim=1), ["Softmax"]),
    (nn.Softmin(dim=1), ["decreasing", "Softmax"]),
    (nn.GLU(), ["halves", "ReLU or sigmoid"]),
    (nn.Softmax(dim=None), ["dim", "nn.Softmax(dim=1)"]),
    (nn.Softmax(dim=0), ["batch", "dim=1"]),
])
def test_activation_from_module_refusals_explain_and_suggest(module, needles):
    with pytest.raises(UnsupportedLayerError) as info:
        activation_from_module(module)
    msg = str(info.value)
    assert "cannot be lifted" in msg and "Nearest supported alternative" in msg
    assert type(module).__name__ in msg
    for needle in needles:
        assert needle in msg, (needle, msg)


@pytest.mark.parametrize("op, attrs, spec", [
    ("Identity", {}, {"name": "identity"}),
    ("Relu", {}, {"name": "relu"}),
    ("LeakyRelu", {}, {"name": "leaky_relu", "a": 0.01}),
    ("LeakyRelu", {"alpha": 0.25}, {"name": "leaky_relu", "a": 0.25}),
    ("Sigmoid", {}, {"name": "sigmoid"}),
    ("Tanh", {}, {"name": "tanh"}),
    ("Clip", {"min": 0.0, "max": 6.0}, {"name": "clip", "lo": 0.0, "hi": 6.0}),
    ("Clip", {"min": -1.0}, {"name": "clip", "lo": -1.0, "hi": None}),
    ("Clip", {"min": 0.0}, {"name": "relu"}),
    ("Clip", {}, {"name": "identity"}),
    ("Softmax", {"axis": 1}, {"name": "softmax", "dim": 1}),
    ("Softmax", {}, {"name": "softmax", "dim": -1}),
    ("Softplus", {}, {"name": "softplus", "beta": 1.0}),
    ("Elu", {}, {"name": "elu", "alpha": 1.0}),
    ("Elu", {"alpha": 0.4}, {"name": "elu", "alpha": 0.4}),
    ("Softsign", {}, {"name": "softsign"}),
    ("HardSigmoid", {"alpha": float(np.float32(1 / 6)), "beta": 0.5}, {"name": "hard_sigmoid"}),
    ("Shrink", {"bias": 0.5, "lambd": 0.5}, {"name": "soft_shrink", "lam": 0.5}),
])
def test_activation_from_onnx_maps(op, attrs, spec):
    assert activation_from_onnx(op, attrs).spec() == spec


def test_activation_from_onnx_softmax_opset_and_none():
    assert activation_from_onnx("Softmax", {}, opset=11).spec() == {"name": "softmax", "dim": 1}
    assert activation_from_onnx("Softmax", {"axis": 1}, opset=11, input_rank=2) is not None
    with pytest.raises(UnsupportedLayerError, match="opset 11 < 13"):
        activation_from_onnx("Softmax", {"axis": 1}, opset=11, input_rank=4)
    for op in ("Gemm", "Conv", "Flatten", "MaxPool", "Add"):
        assert activation_from_onnx(op, {}) is None


@pytest.mark.parametrize("op, attrs, needles", [
    ("Gelu", {}, ["not monotone", "1.129"]),
    ("Selu", {}, ["1.758", "ELU"]),
    ("HardSwish", {}, ["1.5"]),
    ("Elu", {"alpha": 1.7}, ["1.7 > 1", "0 < alpha <= 1"]),
    ("LeakyRelu", {"alpha": 2.0}, ["2.0 > 1"]),
    ("HardSigmoid", {}, ["alpha=0.2", "1/6", "torch.nn.Hardsigmoid"]),
    ("Shrink", {"bias": 0.0, "lambd": 0.5}, ["discontinuous", "hard shrinkage"]),
    ("ThresholdedRelu", {"alpha": 1.0}, ["discontinuous", "Relu"]),
    ("Softmax", {"axis": 0}, ["batch"]),
])
def test_activation_from_onnx_refusals(op, attrs, needles):
    with pytest.raises(UnsupportedLayerError) as info:
        activation_from_onnx(op, attrs)
    msg = str(info.value)
    assert f"ONNX {op}" in msg and "Nearest supported alternative" in msg
    for needle in needles:
        assert needle in msg, (needle, msg)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu(case):
    act = case[0]
    z = torch.linspace(-6, 6, 50, dtype=F64).reshape(5, 10)
    x = act.project(z / 7)
    for fn, args in (("sigma", (z,)), ("bregman", (x, z)), ("conjugate", (z,)), ("psi", (x,))):
        cpu = getattr(act, fn)(*args)
        gpu = getattr(act, fn)(*[a.cuda() for a in args])
        assert gpu.device.type == "cuda" and (gpu.cpu() - cpu).abs().max() < 1e-12
    assert (act.prox(z.cuda(), 0.3).cpu() - act.prox(z, 0.3)).abs().max() < 1e-12
