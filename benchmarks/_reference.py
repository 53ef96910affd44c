"""Exact optima with cvxpy (float64), shared by the convergence and alternatives sections.

The objective is the paper's, written in closed form for cvxpy: for ReLU,
B(y, z) = ½ y² + ½ max(z, 0)² − y z, plus alpha times isotropic TV with forward differences
and Neumann boundary (MATH.md §2.3, §4.1); the value is re-evaluated with the engine's own
float64 objective so that every gap is measured with one formula.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import numpy as np
import torch

_CACHE: dict[tuple, dict[str, Any]] = {}


def _dense(problem64: Any) -> tuple[np.ndarray, np.ndarray]:
    from lbi_engine.solvers.one_layer.inplace import dense_matrix

    found = dense_matrix(problem64.network.layers[0].affine)
    if found is None:
        raise ValueError("cvxpy reference: only one-layer dense problems are supported")
    w, b = found
    return w.double().numpy(), (b.double().numpy() if b is not None else 0.0)


def cvx_problem(problem64: Any, sample: int = 0) -> tuple[Any, Any]:
    """(cvxpy Problem, variable) for one sample of a one-layer ReLU + isotropic TV problem."""
    import cvxpy as cp

    if problem64.network.layers[0].activation.name != "relu":
        raise ValueError("cvxpy reference: the closed form here is for ReLU")
    w, b = _dense(problem64)
    y = problem64.y_delta[sample].reshape(-1).double().numpy()
    h, wd = problem64.image_shape[-2:]
    x = cp.Variable(w.shape[1])
    z = w @ x + b
    data = cp.sum(0.5 * cp.square(cp.pos(z)) - cp.multiply(y, z)) + 0.5 * float(y @ y)
    img = cp.reshape(x, (h, wd), order="C")
    gh = cp.vstack([img[1:, :] - img[:-1, :], np.zeros((1, wd))])
    gw = cp.hstack([img[:, 1:] - img[:, :-1], np.zeros((h, 1))])
    tv = cp.sum(cp.norm(cp.vstack([cp.vec(gh, order="C"), cp.vec(gw, order="C")]), 2, axis=0))
    return cp.Problem(cp.Minimize(data + problem64.alpha * tv)), x


def cvx_solve(key: str, problem64: Any, solver: str, sample: int = 0) -> dict[str, Any]:
    """Solves with cvxpy's ``solver`` at its default settings (cached per key and solver):
    total seconds (building the model included, as a user pays it), solver seconds, x and
    the engine's float64 objective at x."""
    digest = hashlib.sha256(problem64.y_delta[sample].double().numpy().tobytes()).hexdigest()
    cache_key = (key, solver, sample, digest, float(problem64.alpha))
    if cache_key in _CACHE:
        return _CACHE[cache_key]
    start = time.perf_counter()
    prob, var = cvx_problem(problem64, sample)
    prob.solve(solver=solver)
    seconds = time.perf_counter() - start
    x = torch.from_numpy(np.asarray(var.value, dtype=np.float64)).reshape(
        1, *problem64.input_shape)
    single = _single(problem64, sample)
    with torch.no_grad():
        value = float(single.objective_parts(x)["total"][0])
    stats = prob.solver_stats
    out = {"seconds": seconds, "solve_seconds": getattr(stats, "solve_time", None),
           "x": x, "value": value, "status": prob.status}
    _CACHE[cache_key] = out
    return out


def _single(problem64: Any, sample: int) -> Any:
    from lbi_engine.problem import InversionProblem

    return InversionProblem(problem64.network, problem64.y_delta[sample:sample + 1],
                            problem64.regulariser, problem64.alpha,
                            image_shape=problem64.image_shape)


def optimum(key: str, problem64: Any, sample: int = 0) -> float:
    """The minimum objective of one sample: Clarabel (interior point, tight) by default."""
    return cvx_solve(key, problem64, "CLARABEL", sample)["value"]
