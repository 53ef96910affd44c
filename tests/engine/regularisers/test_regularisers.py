"""Regularisers: gradient, values, subgradients and the factory against independent
computations (MATH.md §4); the proxes are in test_regularisers_prox.py."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from lbi_engine.errors import InputError
from lbi_engine.operators.finite_differences import div, grad, grad_norm_sq
from lbi_engine.regularisers import REGULARISER_NAMES, make_regulariser

SHAPES = [(2, 5, 7), (1, 3, 4, 6), (2, 1, 6), (2, 6, 1), (1, 1, 1), (2, 2, 3, 1, 5), (1, 2, 2, 2)]


# -- independent references (loops and explicit matrices) ---------------------------------------
def diff_matrix(n: int) -> np.ndarray:
    """Forward differences with a zero last row (Neumann), n x n."""
    d = np.zeros((n, n))
    for i in range(n - 1):
        d[i, i], d[i, i + 1] = -1.0, 1.0
    return d


def grad_matrix(c: int, h: int, w: int) -> np.ndarray:
    """The gradient of a (C, H, W) image (row-major) as a (2*C*H*W, C*H*W) matrix."""
    gh = np.kron(np.eye(c), np.kron(diff_matrix(h), np.eye(w)))
    gw = np.kron(np.eye(c), np.kron(np.eye(h), diff_matrix(w)))
    return np.vstack([gh, gw])


def naive_grad(img: np.ndarray) -> np.ndarray:
    """(C, H, W) -> (2, C, H, W) by loops over the definition in MATH.md §4.1."""
    c, h, w = img.shape
    g = np.zeros((2, c, h, w))
    for k in range(c):
        for i in range(h):
            for j in range(w):
                if i < h - 1:
                    g[0, k, i, j] = img[k, i + 1, j] - img[k, i, j]
                if j < w - 1:
                    g[1, k, i, j] = img[k, i, j + 1] - img[k, i, j]
    return g


def naive_tv(img: np.ndarray, iso: bool) -> float:
    g = naive_grad(img)
    total = 0.0
    for i in range(img.shape[1]):
        for j in range(img.shape[2]):
            comps = g[:, :, i, j].ravel()
            total += math.sqrt(float((comps**2).sum())) if iso else float(np.abs(comps).sum())
    return total


def disc() -> torch.Tensor:
    u = torch.linspace(-1, 1, 64, dtype=torch.float64)
    uu, vv = torch.meshgrid(u, u, indexing="ij")
    return ((uu**2 + vv**2) <= 0.25).to(torch.float64)[None]


# -- gradient / divergence --------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES)
def test_divergence_is_minus_adjoint_of_gradient(shape):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    p = torch.randn((shape[0], 2, *shape[1:]), generator=gen, dtype=torch.float64)
    assert grad(x).shape == p.shape and div(p).shape == x.shape
    lhs, rhs = (grad(x) * p).sum().item(), -(x * div(p)).sum().item()
    assert abs(lhs - rhs) <= 1e-12


@pytest.mark.parametrize("chw", [(1, 3, 4), (2, 3, 4), (1, 1, 5), (1, 4, 1), (3, 2, 2)])
def test_gradient_equals_explicit_matrix_and_naive_loop(chw):
    c, h, w = chw
    x = np.random.default_rng(2).normal(size=chw)
    got = grad(torch.tensor(x)[None])[0].numpy()
    np.testing.assert_allclose(got.ravel(), grad_matrix(c, h, w) @ x.ravel(), atol=1e-14)
    np.testing.assert_allclose(got, naive_grad(x), atol=1e-14)


@pytest.mark.parametrize("hw", [(2, 2), (3, 4), (5, 7), (1, 6), (6, 1), (1, 1), (4, 4)])
def test_gradient_norm_closed_form_vs_svd_and_power_iteration(hw):
    h, w = hw
    closed = grad_norm_sq(hw)
    svd = np.linalg.norm(grad_matrix(1, h, w), 2) ** 2 if h * w > 1 else 0.0
    assert closed == pytest.approx(svd, abs=1e-12)
    x = torch.randn((1, h, w), generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    lam = 0.0
    for _ in range(3000):  # power iteration on grad^T grad = -div grad
        y = -div(grad(x))
        new = float(y.norm())
        if new == 0.0 or abs(new - lam) <= 1e-15 * new:
            lam = new
            break
        lam, x = new, y / new
    assert lam == pytest.approx(closed, rel=1e-6, abs=1e-12)


def test_gradient_norm_known_values_and_channels():
    assert grad_norm_sq((64, 64)) == pytest.approx(7.99518, abs=5e-6)
    assert grad_norm_sq((28, 28)) == pytest.approx(7.97485, abs=5e-6)
    svd = np.linalg.norm(grad_matrix(3, 4, 5), 2) ** 2  # channels: same norm
    for name in ("tv", "tv-aniso", "gradient-tikhonov"):
        reg = make_regulariser(name)
        assert reg.K_norm_sq((3, 4, 5)) == pytest.approx(svd, abs=1e-12)
        assert reg.K_norm_sq((7, 3, 4, 5)) == reg.K_norm_sq((4, 5))  # batch dim optional
    for name in ("tikhonov", "l1", "nonneg", "box", "none"):
        assert make_regulariser(name).K_norm_sq((3, 4, 5)) == 0.0


def test_image_shape_is_required():
    with pytest.raises(InputError, match=r"\(B, H, W\)"):
        make_regulariser("tv").value(torch.zeros(2, 16))


# -- values -------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 4, 5), (2, 3, 5, 6), (1, 1, 7), (1, 2, 5, 1)])
@pytest.mark.parametrize("iso", [True, False])
def test_tv_value_matches_naive_loop(shape, iso):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    reg = make_regulariser("tv" if iso else "tv-aniso")
    imgs = x.reshape(shape[0], -1, shape[-2], shape[-1]).numpy()
    ref = np.array([naive_tv(img, iso) for img in imgs])
    np.testing.assert_allclose(reg.value(x).numpy(), ref, rtol=1e-13)
    np.testing.assert_allclose(reg.value(x.float()).numpy(), ref, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_paper_disc_values(dtype):
    x = disc().to(dtype)
    assert int(x.sum()) == 788
    assert make_regulariser("tv-aniso").value(x).item() == pytest.approx(128.0, abs=1e-4)
    assert make_regulariser("tv").value(x).item() == pytest.approx(116.87, abs=5e-3)
    assert x.flatten(1).norm(dim=1).item() == pytest.approx(28.071, abs=5e-4)


def test_other_values_and_split_consistency():
    """h(alpha K x) + alpha g(x) must equal alpha R(x), with h and g written out here."""
    x = torch.randn((2, 2, 4, 5), generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    alpha = 0.37
    gx = naive_grad(x[0].numpy())
    expected = {
        "tv": np.sqrt((gx**2).sum(axis=(0, 1))).sum(),
        "tv-aniso": np.abs(gx).sum(),
        "gradient-tikhonov": 0.5 * (gx**2).sum(),
        "tikhonov": 0.5 * float((x[0] ** 2).sum()),
        "l1": float(x[0].abs().sum()),
        "none": 0.0,
    }
    h = {  # h as functions of u = alpha K x
        "tv": lambda u: np.sqrt((u**2).sum(axis=(0, 1))).sum(),
        "tv-aniso": lambda u: np.abs(u).sum(),
        "gradient-tikhonov": lambda u: (u**2).sum() / (2 * alpha),
    }
    for name, value in expected.items():
        reg = make_regulariser(name)
        assert reg.value(x)[0].item() == pytest.approx(value, rel=1e-13, abs=1e-14)
        if name in h:
            u = alpha * reg.K(x)[0].numpy()
            assert h[name](u) == pytest.approx(alpha * value, rel=1e-13)


def test_constraint_violation_gives_inf_with_tolerance():
    reg = make_regulariser({"name": "tv", "box": [0, 1]})
    x = torch.full((3, 4, 4), 0.5, dtype=torch.float64)
    x[1, 0, 0] = 1 + 5e-7  # within the documented tolerance (1e-6)
    x[2, 0, 0] = 1 + 1e-5
    v = reg.value(x)
    assert torch.isfinite(v[:2]).all() and v[2].item() == math.inf
    nonneg = make_regulariser("nonneg")
    y = torch.tensor([[[0.0, 1.0]], [[-1e-3, 1.0]]])
    assert nonneg.value(y).tolist() == [0.0, math.inf]
    a = nonneg.alpha_value(y, 0.0)  # alpha irrelevant for a constraint: no 0 * inf = NaN
    assert a.tolist() == [0.0, math.inf]
    per_sample = make_regulariser("l1").alpha_value(y.abs(), torch.tensor([2.0, 3.0]))
    assert per_sample.tolist() == pytest.approx([2.0, 3.003])


# -- subgradients -------------------------------------------------------------------------------
def _piecewise_image() -> torch.Tensor:
    x = torch.zeros((2, 2, 7, 8), dtype=torch.float64)
    x[0, 0, 2:5, 3:7] = 1.0  # flat regions: the gradient vanishes there
    x[0, 1, 1:4, :] = -0.5
    x[1] = torch.randn((2, 7, 8), generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    return x


@pytest.mark.parametrize("iso", [True, False])
def test_tv_subgradient_identity_and_dual_ball(iso):
    x = _piecewise_image()
    reg = make_regulariser("tv" if iso else "tv-aniso")
    q = reg.subgradient(x)
    np.testing.assert_allclose((q * x).flatten(1).sum(1).numpy(), reg.value(x).numpy(),
                               rtol=1e-13)
    # z by loops: normalised gradient (sign for aniso), 0 where the gradient vanishes
    for b in range(x.shape[0]):
        g = naive_grad(x[b].numpy())
        if iso:
            n = np.sqrt((g**2).sum(axis=(0, 1), keepdims=True))
            z = np.where(n > 0, g / np.where(n > 0, n, 1), 0.0)
            assert np.sqrt((z**2).sum(axis=(0, 1))).max() <= 1 + 1e-12
        else:
            z = np.sign(g)
        assert np.abs(z).max() <= 1
        gm = grad_matrix(2, 7, 8)  # q = -div z = grad^T z
        np.testing.assert_allclose(q[b].numpy().ravel(), gm.T @ z.ravel(), atol=1e-13)
    # subgradient inequality TV(y) >= TV(x) + <q, y - x> for random y
    gen = torch.Generator().manual_seed(12)
    for _ in range(20):
        y = torch.randn(x.shape, generator=gen, dtype=torch.float64)
        gap = reg.value(y) - reg.value(x) - ((q * (y - x)).flatten(1).sum(1))
        assert gap.min().item() >= -1e-12


def test_smooth_and_other_subgradients():
    x = torch.randn((2, 2, 4, 5), generator=torch.Generator().manual_seed(13), dtype=torch.float64)
    for name in ("tikhonov", "gradient-tikhonov"):
        reg = make_regulariser(name)
        xr = x.clone().requires_grad_(True)
        (auto,) = torch.autograd.grad(reg.value(xr).sum(), xr)
        assert (reg.subgradient(x) - auto).abs().max() <= 1e-13
    x[0, 0, 0, 0] = 0.0
    l1 = make_regulariser("l1").subgradient(x)
    assert l1[0, 0, 0, 0] == 0 and torch.equal(l1, torch.sign(x))
    for name in ("none", "nonneg", "box"):
        assert make_regulariser(name).subgradient(x).abs().max() == 0


def test_autograd_through_tv_at_a_flat_image_is_finite():
    x = torch.zeros((1, 5, 5), dtype=torch.float64, requires_grad=True)
    make_regulariser("tv").value(x).sum().backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().max() == 0


# -- factory ------------------------------------------------------------------------------------
def test_make_regulariser_parsing_and_round_trip():
    cases = {
        "tv": ("tv", -math.inf, math.inf),
        "TV_aniso": ("tv-aniso", -math.inf, math.inf),
        "tv+nonneg": ("tv", 0.0, math.inf),
        "tv+box": ("tv", 0.0, 1.0),
        "h1": ("gradient-tikhonov", -math.inf, math.inf),
        "box": ("box", 0.0, 1.0),
        "nonneg": ("nonneg", 0.0, math.inf),
        "none": ("none", -math.inf, math.inf),
    }
    for spec, (name, lo, hi) in cases.items():
        reg = make_regulariser(spec)
        assert (reg.name, reg.lo, reg.hi) == (name, lo, hi)
    dicts = [{"name": "box", "lo": -0.13, "hi": 0.87}, {"name": "box", "lo": -1},
             {"name": "tv", "box": [0, 1]}, {"name": "l1", "nonneg": True},
             {"name": "tikhonov", "box": [None, 2.5]}, {"name": "tv", "box": [-1, 1],
                                                        "nonneg": True}]
    for spec in dicts:
        reg = make_regulariser(spec)
        text = json.dumps(reg.spec())  # JSON-safe: unbounded sides are null
        again = make_regulariser(json.loads(text))
        assert again == reg and (again.lo, again.hi) == (reg.lo, reg.hi)
    assert make_regulariser({"name": "tv", "box": [-1, 1], "nonneg": True}).lo == 0.0
    assert make_regulariser({"name": "box", "lo": -1}).hi == math.inf
    for name in REGULARISER_NAMES:
        assert make_regulariser(make_regulariser(name).spec()) == make_regulariser(name)
    assert make_regulariser("tv+box").describe() == "tv + box [0, 1]"


@pytest.mark.parametrize("bad,match", [
    ("tvv", "valid names: tv, tv-aniso, tikhonov"),
    ({"name": "sparse"}, "valid names"),
    ({"box": [0, 1]}, "no 'name'"),
    ({"name": "tv", "weight": 2}, "unknown option"),
    ({"name": "tv", "box": [1, 0]}, "empty"),
    ({"name": "tv", "box": [0]}, "two bounds"),
    ({"name": "box", "lo": "a"}, "must be a number"),
    ({"name": "box", "lo": math.nan, "hi": 1}, "NaN"),
    ("tv+positive", "unknown constraint"),
    (3, "give a name"),
])
def test_make_regulariser_errors(bad, match):
    with pytest.raises(InputError, match=match):
        make_regulariser(bad)
