"""TV on colour images is vectorial (MATH.md §4.1): at each pixel the Euclidean norm over the
2 directions x C channels, TV(x) = sum_ij sqrt(sum_c |grad x_c(i, j)|^2).

Every implementation is held to that one definition, independently computed: the value (numpy
by the formula), the TV prox (cvxpy/Clarabel on the same problem), by each FGP (torch, and the
numba kernel's multichannel path), and whole inversions of a 3-channel convolutional layer
(cvxpy minimum) by the accelerated method (compiled and torch prox) and by Condat–Vũ (fused
numba kernels and torch), so no path can treat channels separately without failing here.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from lbi_engine.operators.finite_differences import tv_iso_value
from lbi_engine.regularisers import make_regulariser
from lbi_engine.solvers import StopRule, final, solve
from tests.engine._nets import gaussian_init, lift
from tests.engine._solver_cases import cvx_bregman, cvx_solve, dense, diff_matrices, problem_for

C, H, W = 3, 6, 5


def _colour_image(seed: int = 0) -> torch.Tensor:
    """Piecewise constant colour blocks plus noise: (1, C, H, W) float64."""
    g = torch.Generator().manual_seed(seed)
    x = torch.zeros(1, C, H, W, dtype=torch.float64)
    x[:, 0, :3] = 1.0
    x[:, 1, :, 2:] = 0.7
    x[:, 2, 2:5, 1:4] = 0.5
    return x + 0.1 * torch.randn(x.shape, generator=g, dtype=torch.float64)


def cvx_colour_tv(x: object, h: int, w: int, channels: int) -> object:
    """sum over pixels of the norm of the 2C differences (x: the (C, H, W) image flattened)."""
    import cvxpy as cp

    dh, dw = diff_matrices(h, w)
    n = h * w
    rows = []
    for c in range(channels):
        part = x[c * n:(c + 1) * n]
        rows += [dh @ part, dw @ part]
    return cp.sum(cp.norm(cp.vstack(rows), 2, axis=0))


def test_value_is_the_vectorial_definition() -> None:
    x = _colour_image()
    a = x[0].numpy()
    gh = np.zeros_like(a)
    gw = np.zeros_like(a)
    gh[:, :-1] = a[:, 1:] - a[:, :-1]
    gw[:, :, :-1] = a[:, :, 1:] - a[:, :, :-1]
    want = np.sqrt((gh ** 2 + gw ** 2).sum(axis=0)).sum()
    assert float(tv_iso_value(x)[0]) == pytest.approx(want, rel=1e-13)
    # and not the channel-wise sum, which is larger here (a check that the test can fail)
    per_channel = np.sqrt(gh ** 2 + gw ** 2).sum()
    assert per_channel > want * 1.05


@pytest.fixture(scope="module")
def tv_prox_reference() -> tuple[torch.Tensor, float, torch.Tensor]:
    """(v, lam, argmin_u 1/2 ||u - v||^2 + lam TV(u)) by cvxpy."""
    import cvxpy as cp

    v, lam = _colour_image(1), 0.15
    u = cp.Variable(C * H * W)
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(u - v.reshape(-1).numpy())
                                     + lam * cvx_colour_tv(u, H, W, C)))
    problem.solve(solver="CLARABEL")
    assert problem.status == "optimal"
    return v, lam, torch.tensor(u.value).reshape(1, C, H, W)


@pytest.mark.parametrize("compiled", [False, True])
def test_fgp_prox_is_the_vectorial_prox(tv_prox_reference, compiled: bool) -> None:
    """Both backends of the TV regulariser's prox (torch; numba's multichannel loops)."""
    from lbi_engine.regularisers import TVProx

    if compiled and not TVProx.compiles_on("cpu"):
        pytest.skip("numba is not usable here")
    v, lam, want = tv_prox_reference
    reg = make_regulariser("tv")
    _is_the_prox(reg.prox(v, lam, compiled=compiled), v, lam, want)


def _is_the_prox(u: torch.Tensor, v: torch.Tensor, lam: float, want: torch.Tensor) -> None:
    """Objective values within cvxpy's accuracy; the objective is 1-strongly convex, so the
    points then agree to about the square root of that (cvxpy's solution to ~3e-6 here)."""
    def objective(x: torch.Tensor) -> float:
        return float(0.5 * (x - v).square().sum() + lam * tv_iso_value(x)[0])

    reference = objective(want)
    assert objective(u) <= reference + 1e-9 * abs(reference)
    assert objective(u) >= reference - 1e-7 * abs(reference)
    torch.testing.assert_close(u, want, rtol=0, atol=1e-5)


@pytest.fixture(scope="module")
def colour_problem():
    """A 3-channel conv layer + ReLU, its data, and the cvxpy minimum of the objective."""
    import cvxpy as cp

    module = gaussian_init(nn.Sequential(nn.Conv2d(C, 4, 3, padding=1), nn.ReLU()), 3)
    net = lift(module, (C, H, W))
    problem = problem_for(net, _colour_image(2).clamp(0, 1), 0.05, std=0.02)
    a, b = dense(problem.network.layers[0].affine)
    x = cp.Variable(a.shape[1])
    y = problem.y_delta.double().flatten(1).numpy()[0]
    minimum = cvx_solve(cvx_bregman("relu", y, a @ x + b)
                        + problem.alpha * cvx_colour_tv(x, H, W, C))
    return problem, minimum


@pytest.mark.parametrize(("steps", "no_numba"), [("auto", False), ("accelerated", True),
                                                 ("balanced", False), ("balanced", True)],
                         ids=["accelerated-compiled", "accelerated-torch",
                              "condat-vu-fused", "condat-vu-torch"])
def test_colour_inversion_reaches_the_cvxpy_minimum(colour_problem, monkeypatch, steps,
                                                    no_numba) -> None:
    problem, minimum = colour_problem
    if no_numba:
        monkeypatch.setenv("LBI_NO_NUMBA", "1")
        monkeypatch.setenv("LBI_FUSED_TV", "0")
    elif steps == "balanced":
        pytest.importorskip("lbi_engine.solvers.kernels.tv_primal_dual")
        monkeypatch.setenv("LBI_FUSED_TV", "1")  # the fused kernels even for a tiny image
    iters = 6000 if steps == "balanced" else 400
    rec = final(solve(problem, "pdhg", stop=StopRule(max_iter=iters, tol=0),
                      options={"steps": steps}))
    gap = (float(rec.objective[0]) - minimum) / minimum
    assert rec.extras["steps"] == ("balanced" if steps == "balanced" else "accelerated")
    assert -1e-7 < gap < 1e-6, gap
