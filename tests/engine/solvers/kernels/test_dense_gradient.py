"""The one-pass gradient step through a dense layer (solvers/kernels/dense_gradient.py).

The kernel against the two products it replaces, computed by torch in float64 (float64 to
1e-13, float32 to its rounding: at least as close to float64 as torch's own float32
products), over shapes whose row count is and is not a multiple of the kernel's four-row
block, ReLU / identity / clip, one and several samples; NaN propagation per sample; refused
arrays; where the Condat–Vũ block takes it; and whole runs with and without it giving the same
iterates to rounding.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from lbi_engine.models.network import LiftedNetwork
from lbi_engine.operators.backend import FUSED_TV_ENV, NO_NUMBA_ENV
from lbi_engine.problem import InversionProblem
from lbi_engine.regularisers import make_regulariser
from lbi_engine.settings.solver import SolverOptions
from lbi_engine.solvers import StopRule, final, solve
from lbi_engine.solvers.one_layer import inplace
from lbi_engine.solvers.one_layer.inplace import ONE_PASS_MAX_BATCH
from lbi_engine.solvers.one_layer.primal_dual import PrimalDualBlock

K = pytest.importorskip("lbi_engine.solvers.kernels.dense_gradient")

BOUNDS = {"relu": (0.0, math.inf), "identity": (-math.inf, math.inf), "clip": (-0.2, 0.3)}


def _reference(w: torch.Tensor, b: torch.Tensor, x: torch.Tensor, data: torch.Tensor,
               scale: float, lo: float, hi: float) -> torch.Tensor:
    """scale W^T (clip(W x + b, lo, hi) - data) in float64 by torch's two products."""
    w, b, x, data = (t.double() for t in (w, b, x, data))
    return scale * ((x @ w.T + b).clamp(lo, hi) - data) @ w


def _arrays(m: int, n: int, batch: int, dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(m, n, generator=gen).to(dtype) / math.sqrt(n)
    b = 0.1 * torch.randn(m, generator=gen).to(dtype)
    x = torch.rand(batch, n, generator=gen).to(dtype)
    # data: zero where the unit is off for about half of the rows (those rows are skipped)
    data = ((x @ w.T + b) + 0.05 * torch.randn(batch, m, generator=gen).to(dtype)).clamp_min(0)
    return w, b, x, data


def _kernel(w: torch.Tensor, b: torch.Tensor, x: torch.Tensor, data: torch.Tensor,
            scale: float, lo: float, hi: float) -> np.ndarray:
    out = np.full(x.shape, 7.0, dtype=x.numpy().dtype)  # stale content: the kernel overwrites
    args = (w.numpy(), b.numpy(), x.numpy(), data.numpy(), out)
    K.check(*args)
    K.gradient_step(*args, K.constants(out.dtype, scale, lo, hi))
    return out


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("activation", sorted(BOUNDS))
@pytest.mark.parametrize(("m", "n", "batch"), [(40, 100, 1), (13, 37, 3), (3, 9, 2),
                                               (517, 300, 2)])
def test_the_one_pass_equals_the_two_products(dtype: torch.dtype, activation: str, m: int,
                                              n: int, batch: int) -> None:
    w, b, x, data = _arrays(m, n, batch, dtype, seed=m + n)
    lo, hi = BOUNDS[activation]
    expected = _reference(w, b, x, data, -0.7, lo, hi)
    actual = torch.from_numpy(_kernel(w, b, x, data, -0.7, lo, hi)).double()
    scale = float(expected.abs().max())
    assert scale > 1e-3  # the residual is not all zero
    if dtype == torch.float64:
        torch.testing.assert_close(actual, expected, rtol=0, atol=1e-13 * scale)
    else:  # no further from float64 than torch's own float32 products (plus a margin)
        torch32 = _reference(w, b, x, data, -0.7, lo, hi).to(dtype)  # rounding of the result
        blas32 = -0.7 * ((x @ w.T + b).clamp(lo, hi) - data) @ w
        bound = max(float((blas32.double() - expected).abs().max()),
                    float((torch32.double() - expected).abs().max()))
        assert float((actual - expected).abs().max()) <= 2 * bound + 1e-7 * scale


def test_rows_without_residual_add_nothing_and_all_zero_gives_zero() -> None:
    gen = torch.Generator().manual_seed(1)  # small integers: every sum is exact
    w, x = (torch.randint(-3, 4, shape, generator=gen).double() for shape in ((13, 20), (2, 20)))
    b = torch.randint(-3, 4, (13,), generator=gen).double()
    data = (x @ w.T + b).clamp_min(0)  # exact fit: every residual is 0
    assert bool((data == 0).any()) and bool((data > 0).any())
    assert not _kernel(w, b, x, data, -1.0, 0.0, math.inf).any()


def test_nan_stays_in_its_sample_and_bad_arrays_are_refused() -> None:
    w, b, x, data = _arrays(10, 16, 2, torch.float32, seed=2)
    x[1, 3] = math.nan
    out = _kernel(w, b, x, data, -1.0, 0.0, math.inf)
    assert np.isnan(out[1]).all() and np.isfinite(out[0]).all()
    good = [w.numpy(), b.numpy(), x.numpy(), data.numpy(), np.zeros((2, 16), np.float32)]
    bads = {0: w.numpy().T.copy(), 1: b.numpy()[:5], 2: x.numpy().astype(np.float64),
            4: np.asfortranarray(np.zeros((2, 16), np.float32))}
    for where, bad in bads.items():
        with pytest.raises(ValueError, match="does not match"):
            K.check(*good[:where], bad, *good[where + 1:])
    with pytest.raises(ValueError, match="float32/float64"):
        K.check(*(a.astype(np.float16) for a in good))


# -- in the Condat–Vũ block ------------------------------------------------------------------------
def _problem(batch: int, dtype: torch.dtype, activation: nn.Module | None = None,
             side: int = 12) -> InversionProblem:
    torch.manual_seed(0)
    module = nn.Sequential(nn.Flatten(), nn.Linear(side * side, 90),
                           activation if activation is not None else nn.ReLU())
    net = LiftedNetwork.from_module(module, (1, side, side)).to(dtype=dtype)
    x_true = torch.zeros(batch, 1, side, side, dtype=dtype)
    x_true[..., 3:9, 2:8] = torch.linspace(0.5, 1.0, batch, dtype=dtype)[:, None, None, None]
    y = net.forward(x_true)
    y = y + 0.01 * torch.randn(y.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    return InversionProblem(net, y.clamp_min(0), make_regulariser("tv"), 0.02)


def _block(problem: InversionProblem) -> PrimalDualBlock:
    return PrimalDualBlock(problem.network.layers[0], problem,
                           SolverOptions.from_dict({"steps": "balanced"}),
                           problem.zeros_input())


def test_the_block_takes_it_only_where_it_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FUSED_TV_ENV, "1")
    assert _block(_problem(2, torch.float32))._one_pass is not None
    assert _block(_problem(2, torch.float64, nn.Identity()))._one_pass is not None
    assert _block(_problem(2, torch.float64, nn.ReLU6()))._one_pass is not None
    assert _block(_problem(ONE_PASS_MAX_BATCH + 1, torch.float64))._one_pass is None
    assert _block(_problem(2, torch.float64, nn.Tanh()))._one_pass is None  # not a clip
    monkeypatch.setenv(FUSED_TV_ENV, "0")  # the BLAS products beside the torch TV path
    assert _block(_problem(2, torch.float64))._one_pass is None
    monkeypatch.setenv(FUSED_TV_ENV, "1")
    monkeypatch.setenv(NO_NUMBA_ENV, "1")
    assert _block(_problem(2, torch.float64))._one_pass is None


def test_data_changed_in_place_is_read_each_step_strided_or_not() -> None:
    w, b, x, data = _arrays(9, 12, 2, torch.float64, seed=4)
    slots = [x.clone(), x.clone()]
    steps = [torch.zeros_like(x), torch.zeros_like(x)]
    plan = inplace.one_pass_plan(_problem(2, torch.float64).network.layers[0].activation,
                                 _dense(w, b), slots, steps, 0.5)
    assert plan is not None
    wide = torch.zeros(2, 9, 2, dtype=torch.float64)  # data[..., 0]: a strided view
    for given in (data.clone(), wide[..., 0]):
        given.copy_(data)
        for k in range(3):  # the same tensor, changed in place between steps
            plan(k % 2, given)
            expected = _reference(w, b, slots[k % 2], given, -0.5, 0.0, math.inf)
            torch.testing.assert_close(steps[1 - k % 2], expected, rtol=0, atol=1e-13)
            given.mul_(0.5)


def _dense(w: torch.Tensor, b: torch.Tensor) -> object:
    """A Linear map on flat input holding w and b (what dense_matrix recognises)."""
    module = nn.Linear(w.shape[1], w.shape[0]).to(torch.float64)
    with torch.no_grad():
        module.weight.copy_(w)
        module.bias.copy_(b)
    net = LiftedNetwork.from_module(nn.Sequential(module, nn.ReLU()), (w.shape[1],))
    return net.layers[0].affine


def _run(problem: InversionProblem, iterations: int) -> object:
    return final(solve(problem, "pdhg", stop=StopRule(max_iter=iterations, tol=0),
                       options={"steps": "balanced"}))


@pytest.mark.parametrize(("dtype", "activation"), [(torch.float64, nn.ReLU()),
                                                   (torch.float32, nn.ReLU()),
                                                   (torch.float64, nn.Hardtanh(-0.5, 0.4))])
def test_runs_with_and_without_it_give_the_same_iterates(dtype: torch.dtype,
                                                         activation: nn.Module,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FUSED_TV_ENV, "1")
    problem = _problem(3, dtype, activation)
    used = []
    plan = inplace.one_pass_plan

    def spy(*args: object) -> object:
        used.append(plan(*args))  # type: ignore[arg-type]
        return used[-1]

    monkeypatch.setattr("lbi_engine.solvers.one_layer.primal_dual.one_pass_plan", spy)
    one_pass = _run(problem, 200)
    monkeypatch.setattr("lbi_engine.solvers.one_layer.primal_dual.one_pass_plan",
                        lambda *args: None)
    blas = _run(problem, 200)
    assert used and used[0] is not None  # the first run did take it
    scale = float(blas.x.abs().max())
    assert scale > 0.1  # the run moved
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    torch.testing.assert_close(one_pass.x, blas.x, rtol=0, atol=tol * scale)
    torch.testing.assert_close(one_pass.warm.dual, blas.warm.dual, rtol=0, atol=tol)
