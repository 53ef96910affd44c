"""Small inversion problems and independent reference computations for the solver tests.

Everything here is test-only: the images the seeded networks of ``_nets`` invert, problems
small enough that a run takes well under a second, and the same objectives written out in
cvxpy (a different code path from lbi_engine, solved by an interior-point method) so that a
solver's answer can be checked against a solution nobody in this project computed.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from lbi_engine.models.network import LiftedNetwork
from lbi_engine.problem import InversionProblem
from lbi_engine.regularisers import make_regulariser
from lbi_engine.solvers import IterateRecord, solve

# The networks live in tests/engine/_nets.py; re-exported so solver tests import one module.
from tests.engine._nets import chain as chain
from tests.engine._nets import gaussian_init as gaussian_init
from tests.engine._nets import lift as lift
from tests.engine._nets import relu_mlp as relu_mlp
from tests.engine._nets import relu_perceptron as relu_perceptron


# -- images -------------------------------------------------------------------------------------
def disc(side: int, radius: float, dtype: torch.dtype = torch.float64) -> Tensor:
    """A centred binary disc, ``(side, side)``."""
    yy, xx = np.mgrid[:side, :side]
    c = (side - 1) / 2
    return torch.tensor(((yy - c) ** 2 + (xx - c) ** 2 <= radius**2).astype(float), dtype=dtype)


def noisy(net: LiftedNetwork, x_true: Tensor, std: float, seed: int) -> tuple[Tensor, Tensor]:
    """(y_delta, ||y_delta - y||): Gaussian noise projected onto dom Psi_L (MATH.md §7)."""
    y = net.forward(x_true)
    g = torch.Generator().manual_seed(seed)
    noise = torch.randn(y.shape, generator=g, dtype=torch.float64).to(y.dtype)
    y_delta = net.layers[-1].activation.project(y + std * noise)
    return y_delta, (y_delta - y).flatten(1).norm(dim=1)


def problem_for(net: LiftedNetwork, x_true: Tensor, alpha: float, std: float = 0.0,
                seed: int = 0, reg: str = "tv", **kw: object) -> InversionProblem:
    y_delta, delta = noisy(net, x_true, std, seed)
    return InversionProblem(net, y_delta, make_regulariser(reg), alpha, x_true=x_true,
                            delta=delta, **kw)


def run(problem: InversionProblem, method: str, **kw: object) -> list[IterateRecord]:
    return list(solve(problem, method, **kw))


def objectives(records: list[IterateRecord], sample: int = 0) -> np.ndarray:
    """The objective per distinct iteration (the final record repeats the last report)."""
    seen: dict[int, float] = {}
    for r in records:
        seen[r.iteration] = float(r.objective[sample])
    return np.array([seen[k] for k in sorted(seen)])


# -- independent references --------------------------------------------------------------------
def dense(affine: object) -> tuple[np.ndarray, np.ndarray]:
    """(A, b) with affine.apply(x) = A x + b on flattened samples."""
    a = affine.dense().to(torch.float64).numpy()
    zero = torch.zeros((1, *affine.in_shape), dtype=torch.float64)
    b = affine.to(dtype=torch.float64).apply(zero).reshape(-1).numpy()
    return a, b


def diff_matrices(h: int, w: int) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Forward differences with Neumann boundary (MATH.md §4.1) on row-major (h, w) images,
    written independently of lbi_engine.operators.finite_differences."""
    def d1(n: int) -> sp.csr_matrix:
        d = sp.diags([-np.ones(n), np.ones(n - 1)], [0, 1], shape=(n, n)).tolil()
        d[n - 1, :] = 0
        return d.tocsr()
    return sp.kron(d1(h), sp.eye(w)).tocsr(), sp.kron(sp.eye(h), d1(w)).tocsr()


def tv_numpy(x: np.ndarray, h: int, w: int, isotropic: bool = True) -> float:
    dh, dw = diff_matrices(h, w)
    gh, gw = dh @ x.reshape(-1), dw @ x.reshape(-1)
    return float(np.sqrt(gh**2 + gw**2).sum() if isotropic else (abs(gh) + abs(gw)).sum())


def cvx_tv(x: object, h: int, w: int, isotropic: bool = True, channels: int = 1) -> object:
    """TV of a cvxpy vector holding ``channels`` row-major (h, w) images one after the other;
    isotropic TV is vectorial over the channels (one Euclidean norm per pixel)."""
    import cvxpy as cp

    dh, dw = diff_matrices(h, w)
    n = h * w
    parts = []
    for c in range(channels):
        part = x[c * n:(c + 1) * n]  # type: ignore[index]
        parts += [dh @ part, dw @ part]
    if isotropic:
        return cp.sum(cp.norm(cp.vstack(parts), 2, axis=0))
    return sum(cp.norm1(p) for p in parts)


def cvx_bregman(activation: str, y: np.ndarray, z: object) -> object:
    """B_Psi(y, z) in cvxpy for y in dom Psi (closed forms of MATH.md §2.3), incl. constants."""
    import cvxpy as cp

    if activation == "identity":
        return 0.5 * cp.sum_squares(y - z)
    if activation == "relu":  # ½ y^2 + ½ z_+^2 - y z
        return cp.sum(0.5 * cp.square(cp.pos(z)) - cp.multiply(y, z)) + 0.5 * float(y @ y)
    raise ValueError(activation)


def cvx_solve(objective: object) -> float:
    import cvxpy as cp

    problem = cp.Problem(cp.Minimize(objective))
    problem.solve(solver="CLARABEL")
    assert problem.status == "optimal", problem.status
    return float(problem.value)


def with_feature_prior(problem: InversionProblem, count: int = 300, spread: float = 0.3,
                       rank: int = 8, seed: int = 0) -> InversionProblem:
    """Attach a Gaussian feature prior fitted on ``count`` perturbed copies of the truth (the
    layer-wise method needs one for networks with hidden layers)."""
    from lbi_engine.priors.feature import fit_feature_priors

    g = torch.Generator().manual_seed(seed)
    base = problem.x_true[:1] if problem.x_true is not None else \
        torch.zeros((1, *problem.input_shape), dtype=problem.dtype)
    noise = torch.randn((count, *problem.input_shape), generator=g, dtype=torch.float64)
    samples = (base + spread * noise.to(problem.dtype)).clamp(0.0, 1.0)
    problem.feature_priors = fit_feature_priors(problem.network, samples, rank)
    return problem
