"""The fused numba TV kernels (solvers/kernels/tv_primal_dual.py) against the torch path they
replace.

Each kernel against finite_differences.grad/div and the regularisers' own dual prox (float64
to 1e-12, float32 to its rounding), the adjoint identity through the kernels alone, and whole
PDHG runs (plain, box-constrained, Anderson, anisotropic, gradient-Tikhonov, multichannel)
giving the same iterates with LBI_FUSED_TV=1 as with LBI_FUSED_TV=0. The first run compiles
the kernels (numba caches them in __pycache__; a cold compile takes ~10 s per dtype).
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
import torch
from torch import nn

from lbi_engine.models.network import LiftedNetwork
from lbi_engine.operators.backend import FUSED_TV_ENV
from lbi_engine.operators.finite_differences import div, grad, zero_unused
from lbi_engine.problem import InversionProblem
from lbi_engine.regularisers import make_regulariser
from lbi_engine.settings.solver import SolverOptions
from lbi_engine.solvers import StopRule, final, solve
from lbi_engine.solvers.one_layer.inplace import FUSED_TV_MIN_PIXELS, fused_tv_plan
from lbi_engine.solvers.one_layer.primal_dual import PrimalDualBlock

K = pytest.importorskip("lbi_engine.solvers.kernels.tv_primal_dual")

# (channels, H, W): odd sizes, a single row, a single column, two channels
SHAPES = [(1, 6, 7), (1, 1, 6), (1, 6, 1), (2, 5, 4)]
KINDS = {"tv": K.KIND_ISO, "tv-aniso": K.KIND_ANISO, "gradient-tikhonov": K.KIND_SHRINK}
RTOL = {torch.float64: 1e-12, torch.float32: 3e-6}


def _close(actual: np.ndarray | torch.Tensor, expected: torch.Tensor,
           dtype: torch.dtype | None = None) -> None:
    """Equal up to the rounding of ``dtype`` (default: expected's), relative to the largest
    entry."""
    actual = torch.as_tensor(actual).reshape(expected.shape)
    scale = float(expected.abs().max()) or 1.0
    tol = RTOL[dtype or expected.dtype] * scale
    torch.testing.assert_close(actual, expected, rtol=0, atol=tol)


def _norms(*parts: torch.Tensor) -> torch.Tensor:
    return torch.stack([p.reshape(p.shape[0], -1).double().norm(dim=1) for p in parts], dim=1)


def _data(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    x_old = torch.randn(3, *shape, generator=gen).to(dtype)
    step = 0.3 * torch.randn(3, *shape, generator=gen).to(dtype)
    z_old = zero_unused(0.6 * torch.randn(3, 2, *shape, generator=gen).to(dtype), shape)
    return x_old, step, z_old


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_primal_step_is_step_plus_div_then_the_box(shape: tuple[int, ...],
                                                    dtype: torch.dtype) -> None:
    x_old, step, z = _data(shape, dtype, 1)
    for lo, hi in ((-math.inf, math.inf), (-0.5, 0.25)):
        d = step + 0.7 * div(z)
        x_new = (x_old + d).clamp(lo, hi)
        if lo > -math.inf:
            d = x_new - x_old
        st, xn, norms = step.clone(), torch.full_like(x_old, 9.0), np.zeros((3, 4))
        total = K.primal_step(x_old.numpy(), st.numpy(), xn.numpy(), z.numpy(), norms, 0.7,
                              lo, hi)
        _close(xn, x_new)
        _close(st, d)
        _close(norms[:, :2], _norms(x_new, d), dtype)
        assert total == pytest.approx(norms[:, :2].sum(), rel=1e-15)


@pytest.mark.parametrize("name", list(KINDS))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_dual_step_is_the_prox_of_an_ascent_at_the_extrapolation(
        name: str, shape: tuple[int, ...], dtype: torch.dtype) -> None:
    reg = make_regulariser(name)
    xa, xb, z_old = _data(shape, dtype, 2)
    tau, alpha, theta = 0.9, 0.8, 1.0
    z_new = reg.prox_dual(z_old + tau * alpha * grad(xa + theta * xb), tau, alpha)
    shrink = 1.0 + tau * alpha
    zn, dz, norms = torch.full_like(z_old, 9.0), torch.full_like(z_old, 9.0), np.zeros((3, 4))
    total = K.dual_step(xa.numpy(), xb.numpy(), theta, z_old.numpy(), zn.numpy(), dz.numpy(),
                        norms, tau * alpha, KINDS[name], shrink)
    _close(zn, z_new)
    _close(dz, z_new - z_old)
    _close(norms[:, 2:], _norms(z_new, z_new - z_old), dtype)
    assert total == pytest.approx(norms[:, 2:].sum(), rel=1e-15)
    # the entries grad never writes come out 0, as the torch path keeps them
    assert float(zn[:, 0, ..., -1, :].abs().max()) == 0.0
    assert float(zn[:, 1, ..., :, -1].abs().max()) == 0.0


@pytest.mark.parametrize("shape", SHAPES)
def test_fused_step_equals_primal_then_dual_at_two_x_new_minus_x(shape: tuple[int, ...]) -> None:
    x_old, step, z_old = _data(shape, torch.float64, 3)
    for store_dz in (True, False):
        parts = [t.clone().numpy() for t in (x_old, step, x_old, z_old, z_old, z_old)]
        ref = [t.clone().numpy() for t in (x_old, step, x_old, z_old, z_old, z_old)]
        fused, split = np.zeros((3, 4)), np.zeros((3, 4))
        kernel = K.PrimalDualKernel(np.float64, 0.3, 0.6, K.KIND_ISO, lo=-1.0, hi=0.5,
                                    store_dz=store_dz)
        total = kernel(*parts, fused)
        K.primal_step(ref[0], ref[1], ref[2], ref[3], split, 0.3, -1.0, 0.5)
        K.dual_step(ref[2], ref[1], 1.0, ref[3], ref[4], ref[5], split, 0.6)
        for i in (1, 2, 4) + ((5,) if store_dz else ()):
            np.testing.assert_array_equal(parts[i], ref[i])
        np.testing.assert_allclose(fused, split, rtol=1e-14)
        assert total == pytest.approx(fused.sum(), rel=1e-14)
        np.testing.assert_array_equal(parts[3], z_old.numpy())  # z_old is read only


@pytest.mark.parametrize("shape", SHAPES)
def test_kernels_grad_and_div_are_minus_adjoint(shape: tuple[int, ...]) -> None:
    """<grad u, p> = -<u, div p>, grad and div both taken from the kernels."""
    u, _, p = _data(shape, torch.float64, 4)
    zeros = torch.zeros_like(u).numpy()
    g = np.zeros(p.shape)
    # z_old = 0, scale 1, identity prox (shrink by 1): z_new = grad(u + 0 * u)
    K.dual_step(u.numpy(), zeros, 0.0, np.zeros(p.shape), g, None, np.zeros((3, 4)), 1.0,
                K.KIND_SHRINK, 1.0)
    d = np.zeros(u.shape)
    K.primal_step(zeros, d, np.zeros(u.shape), p.numpy(), np.zeros((3, 4)), 1.0)  # d = div p
    lhs, rhs = float((g * p.numpy()).sum()), -float((u.numpy() * d).sum())
    assert abs(lhs - rhs) < 1e-12 * max(1.0, abs(lhs))
    _close(g, grad(u))


def test_nan_propagates_and_bad_arrays_are_refused() -> None:
    x_old, step, z_old = _data((1, 5, 5), torch.float64, 5)
    x_old[1, 0, 2, 2] = math.nan
    arrays = [t.clone().numpy() for t in (x_old, step, x_old, z_old, z_old, z_old)]
    norms = np.zeros((3, 4))
    total = K.PrimalDualKernel(np.float64, 0.3, 0.6, K.KIND_ANISO, lo=0.0)(*arrays, norms)
    assert math.isnan(total)
    assert np.isnan(norms[1]).all() and np.isfinite(norms[[0, 2]]).all()
    good = (x_old.numpy(), step.numpy(), x_old.numpy(), z_old.numpy())
    for bad in (np.asfortranarray(step.numpy()), step.numpy().astype(np.float32),
                step.numpy()[:, :, :4, :4], step.numpy()[:2]):
        with pytest.raises(ValueError, match="does not match"):
            K.primal_step(good[0], bad, good[2], good[3], np.zeros((3, 4)), 0.1)
    with pytest.raises(ValueError, match="float32/float64"):
        K.primal_step(*(np.zeros((3, 1, 4, 4), np.float16),) * 3,
                      np.zeros((3, 2, 1, 4, 4), np.float16), np.zeros((3, 4)), 0.1)


# -- whole runs: the fused path gives the torch path's iterates ----------------------------------
def _problem(reg: str, dtype: torch.dtype, channels: int = 1) -> InversionProblem:
    torch.manual_seed(0)
    side = 12
    module = nn.Sequential(nn.Flatten(), nn.Linear(channels * side * side, 90), nn.ReLU())
    net = LiftedNetwork.from_module(module, (channels, side, side)).to(dtype=dtype)
    x_true = torch.zeros(3, channels, side, side, dtype=dtype)
    yy, xx = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    x_true[..., (yy - 6) ** 2 + (xx - 5) ** 2 < 16] = 1.0  # a disc
    x_true = x_true * torch.tensor([1.0, 0.7, 0.4], dtype=dtype)[:, None, None, None]
    y = net.forward(x_true)
    y = y + 0.01 * torch.randn(y.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    return InversionProblem(net, y.clamp_min(0), make_regulariser(reg), 0.02)


def _run(problem: InversionProblem, mode: str, monkeypatch: pytest.MonkeyPatch,
         iterations: int, options: dict | None = None) -> object:
    """Condat–Vũ steps named explicitly: "auto" may pick the accelerated method, whose block
    does not use these kernels."""
    monkeypatch.setenv(FUSED_TV_ENV, mode)
    return final(solve(problem, "pdhg", stop=StopRule(max_iter=iterations, tol=0),
                       options={"steps": "balanced", **(options or {})}))


_RUNS = [(reg, channels, None, dtype)
         for reg, channels in (("tv", 1), ("tv+box", 1), ("tv-aniso", 2), ("gradient-tikhonov", 1))
         for dtype in (torch.float64, torch.float32)]
# Anderson mixing amplifies rounding differences (float64: 1e-16 after 20 iterations, 1e-13
# after 80, 6e-12 after 150 on this problem; float32: 1e-4 after 60, its decisions then
# differ), so it is compared in float64 over fewer steps: that checks the stored dz it reads
_RUNS.append(("tv", 2, {"anderson": 5}, torch.float64))


@pytest.mark.parametrize(("reg", "channels", "options", "dtype"), _RUNS)
def test_pdhg_runs_give_the_same_iterates_both_ways(reg: str, channels: int, options: dict | None,
                                                    dtype: torch.dtype,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    iterations = 60 if options else 150
    problem = _problem(reg, dtype, channels)
    fused = _run(problem, "1", monkeypatch, iterations, options)
    plain = _run(problem, "0", monkeypatch, iterations, options)
    scale = float(plain.x.abs().max())
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(fused.x, plain.x, rtol=0, atol=tol * scale)
    torch.testing.assert_close(fused.warm.dual, plain.warm.dual, rtol=0, atol=tol)
    torch.testing.assert_close(fused.primal_residual, plain.primal_residual, rtol=1e-4,
                               atol=tol)
    assert float(plain.x.abs().max()) > 0.1  # the run did move


def test_the_fused_path_is_taken_only_where_it_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = _problem("tv", torch.float64)
    layer, options = problem.network.layers[0], SolverOptions()

    def block(mode: str, x: torch.Tensor | None = None) -> PrimalDualBlock:
        monkeypatch.setenv(FUSED_TV_ENV, mode)
        return PrimalDualBlock(layer, problem, options, problem.zeros_input() if x is None else x)

    assert block("1")._fused is not None
    assert block("0")._fused is None
    assert 3 * 12 * 12 < FUSED_TV_MIN_PIXELS and block("auto")._fused is None
    # a non-TV regulariser, or a dtype the kernels do not take: torch path
    xp = [torch.zeros(2, 3, 1, 4, 4, dtype=torch.float16)] * 2
    zp = [torch.zeros(2, 3, 2, 1, 4, 4, dtype=torch.float16)] * 2
    monkeypatch.setenv(FUSED_TV_ENV, "1")
    assert fused_tv_plan(make_regulariser("tv"), xp, zp, (1, 4, 4), 1.0, 1.0, 1.0, False) is None
    xp64 = [t.double() for t in xp]
    zp64 = [t.double() for t in zp]
    assert fused_tv_plan(make_regulariser("l1"), xp64, zp64, (1, 4, 4), 1.0, 1.0, 1.0,
                         False) is None
    assert fused_tv_plan(make_regulariser("tv"), xp64, zp64, (1, 4, 4), 1.0, 1.0, 1.0,
                         False) is not None
    # without numba (the import fails) the torch path runs, silently
    monkeypatch.setitem(sys.modules, "lbi_engine.solvers.kernels.tv_primal_dual", None)
    assert fused_tv_plan(make_regulariser("tv"), xp64, zp64, (1, 4, 4), 1.0, 1.0, 1.0,
                         False) is None
