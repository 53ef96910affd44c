"""What a PyTorch user writes instead of lbi to invert a network: the baselines of
``bench_multilayer`` (issue #23, item 3).

* ``lbfgs_curve``: ``torch.optim.LBFGS`` (strong Wolfe line search, history 20, x_0 = 0) on
  1/2 ||E(x) - y||^2 + alpha TV_eps(x), TV smoothed so that L-BFGS sees a smooth objective.
Each returns (seconds, PSNR) after every iteration, timed without the PSNR.
"""

from __future__ import annotations

import time

import torch


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
        if len(curve) > 20 and abs(curve[-1][1] - curve[-21][1]) < 1e-4:
            break
    return curve


