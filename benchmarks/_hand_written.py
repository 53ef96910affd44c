"""What a PyTorch user writes instead of lbi to invert a network: the baselines of
``bench_multilayer`` and of the vision-network studies.

* ``lbfgs_curve``: ``torch.optim.LBFGS`` (strong Wolfe line search, history 20, x_0 = 0) on
  1/2 ||E(x) - y||^2 + alpha TV_eps(x), TV smoothed so that L-BFGS sees a smooth objective.
* ``deepinv_curve``: deepinv's FISTA on 1/2 ||E(x) - y||^2 + alpha TV(x) (exact TV by its
  ``TVPrior``), the encoder as a nonlinear ``Physics``, x_0 = 0, step 1 / ||J_E(0)||^2. Only
  where deepinv imports; it is not a dependency (its install would pull another torch build):
  ``pip install --no-deps --target DIR deepinv==0.5.0 torchmetrics lightning-utilities einops
  requests charset-normalizer idna urllib3 certifi h5py natsort``, then ``PYTHONPATH=.:DIR``.
Each returns (seconds, PSNR) after every iteration, timed without the PSNR, and stops when the
PSNR changed by less than 1e-4 dB over 20 iterations.
"""

from __future__ import annotations

import time
from typing import Any

import torch

#: deepinv's stop: its iteration cap, and the PSNR plateau of ``lbfgs_curve``
DEEPINV_MAX_ITER = 2000
PLATEAU = (20, 1e-4)


def _tv_eps(x: torch.Tensor, eps: float) -> torch.Tensor:
    gh = torch.diff(x, dim=-2, append=x[..., -1:, :])
    gw = torch.diff(x, dim=-1, append=x[..., :, -1:])
    return torch.sqrt(gh * gh + gw * gw + eps * eps).sum()


def lbfgs_curve(encoder: object, y: torch.Tensor, truth: torch.Tensor, alpha: float,
                iters: int = 300, eps: float = 1e-3) -> list[tuple[float, float]]:
    """(seconds, PSNR) after every L-BFGS iteration, what a PyTorch user writes."""
    from lbi_engine import metrics

    x = torch.zeros_like(truth, requires_grad=True)
    opt = torch.optim.LBFGS([x], lr=1, max_iter=1, history_size=20,
                            line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = 0.5 * (encoder.forward(x) - y).pow(2).sum() + alpha * _tv_eps(x, eps)
        loss.backward()
        return loss

    curve, spent = [], 0.0
    for _ in range(iters):
        t0 = time.perf_counter()
        opt.step(closure)
        spent += time.perf_counter() - t0
        with torch.no_grad():
            curve.append((spent, float(metrics.psnr(x.detach(), truth, data_range=1.0)[0])))
        if _flat(curve):
            break
    return curve


def _flat(curve: list[tuple[float, float]]) -> bool:
    span, tol = PLATEAU
    return len(curve) > span and abs(curve[-1][1] - curve[-1 - span][1]) < tol


def deepinv_version() -> str | None:
    """deepinv's version where it imports, else None."""
    try:
        import deepinv
    except ImportError:
        return None
    return str(deepinv.__version__)


def deepinv_step(encoder: Any, like: torch.Tensor) -> float:
    """1 / ||J_E(0)||^2 by deepinv's power method on J^T J (torch.func). deepinv 0.5's own
    ``Physics.compute_norm`` calls ``A_jvp``, which its nonlinear ``Physics`` lacks. The local
    norm at 0 (4.40 on mnist-cnn-ae) is within 5 % of that at the digits and at random images;
    the product of the layers' norms (28.1) would give a 6x smaller step."""
    from deepinv.physics.functional import power_method

    x0 = torch.zeros_like(like)

    def jtj(v: torch.Tensor) -> torch.Tensor:
        _, jv = torch.func.jvp(encoder, (x0,), (v,))
        return torch.func.vjp(encoder, x0)[1](jv)[0]

    torch.manual_seed(0)
    return 1.0 / float(power_method(jtj, x0, max_iter=300, tol=1e-6))


def deepinv_curve(encoder: Any, y: torch.Tensor, truth: torch.Tensor, alpha: float,
                  step: float, max_iter: int = DEEPINV_MAX_ITER) -> list[tuple[float, float]]:
    """(seconds, PSNR) after every iteration of deepinv's FISTA, as a deepinv user writes it,
    with its TV prox set up to be fast: with ``TVPrior``'s defaults every prox runs all its
    1000 inner steps of size 0.01 (their 1e-8 tolerance is below float32's reach); 20 inner
    steps of size 0.1, warm-started by deepinv between calls, reached the same final objective
    to ~1e-4 on the digits tried (a prototype). ``L2()`` with its default sigma 1 is
    1/2 ||.||^2, so lambda = alpha."""
    import deepinv as dinv

    from lbi_engine import metrics

    physics = dinv.physics.Physics(A=encoder)
    prior = dinv.optim.TVPrior(n_it_max=20)  # a new one per solve: its prox keeps a warm start
    prior.TVModel.tau = 0.1
    model = dinv.optim.optim_builder(
        "FISTA", max_iter=max_iter, data_fidelity=dinv.optim.L2(), prior=prior,
        params_algo={"stepsize": step, "lambda": alpha, "a": 3}, early_stop=False)
    curve: list[tuple[float, float]] = []
    clock = {"spent": 0.0, "since": 0.0}

    def record(history: object, x_prev: torch.Tensor, x: torch.Tensor) -> float:
        # deepinv's custom metric, called after every iteration: its own time is not counted
        now = time.perf_counter()
        clock["spent"] += now - clock["since"]
        psnr = float(metrics.psnr(x.unsqueeze(0), truth, data_range=1.0)[0])
        curve.append((clock["spent"], psnr))
        if _flat(curve):  # deepinv's loop runs while its iteration count is below this
            model.fixed_point.max_iter = 0
        clock["since"] = time.perf_counter()
        return psnr

    model.custom_metrics = {"psnr_timed": record}
    x0 = torch.zeros_like(truth)
    clock["since"] = time.perf_counter()
    # init (x_0, z_0): without it deepinv starts from A^T y, which a nonlinear Physics lacks
    model(y, physics, init=(x0, x0.clone()), compute_metrics=True)
    return curve


