"""Elementwise proximal activations (MATH.md §1-§2), each checked against an independent
computation: psi written directly from the table of MATH.md §2.2 in NumPy/SciPy (Li2 via
scipy.special.spence), brute-force argmins (vectorised golden section on the convex
objective, itself checked against scipy's bounded Brent), the prox fixed-point identity of
MATH.md §2.4, and central finite differences. Softmax and Li2: test_activations_softmax.py;
registry and torch/ONNX mappings: test_activation_mapping.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar
from scipy.special import spence, xlogy

from lbi_engine.activations import make_activation
from lbi_engine.errors import InputError, ShapeMismatchError

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
    s = act.sigma(_t(z))
    ident = _np(_t(z) * s - 0.5 * s**2) - _np(act.psi(s))
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
    # the slack scales with each bound separately: a far-away lower bound does not loosen hi
    c = make_activation({"name": "clip", "lo": -1e8, "hi": 6.0})
    xc = torch.tensor([[6.0 + 1e-9], [6.5], [-1e8 - 1.0]], dtype=F64)
    assert c.in_domain(xc, atol=1e-6).tolist() == [True, False, True]
    assert torch.isinf(c.bregman(xc[1:2], torch.zeros(1, 1, dtype=F64)))
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


def test_bregman_in_domain_is_bregman_inside_the_domain(case):
    """The unchecked form solvers use on their own projected iterates equals the checked one
    on points of the closed domain (4 samples of 16 entries)."""
    act, spec, bracket, _ = case
    rng = np.random.default_rng(1)
    x = _domain_points(spec, bracket, 64, rng)[:64]
    x = torch.tensor(np.resize(x, 64).reshape(4, 16), dtype=F64)
    z = torch.tensor(rng.normal(0, 3, (4, 16)), dtype=F64)
    torch.testing.assert_close(act.bregman_in_domain(x, z), act.bregman(x, z),
                               rtol=1e-12, atol=1e-12)
