"""The joint method's start: the back-projection candidate that fits the code best.

Where every first pre-activation of the scaled back-projection sits at a kink (a bias-free
convolution followed by ReLU at x = 0), the lifted gradient in x vanishes at the flat image
and the method cannot leave it; the start therefore also tries mid-grey + s v and keeps the
candidate whose forward pass fits the code best (checked here by brute force).
"""

from __future__ import annotations

import torch
from torch import nn

from lbi_engine.models.network import LiftedNetwork
from lbi_engine.solvers.joint.start import SCALES, compute_backprojection_start
from tests.engine._solver_cases import problem_for


def _kinked_net() -> LiftedNetwork:
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.ReLU(),
                           nn.Conv2d(4, 4, 3, padding=1, stride=2, bias=False), nn.ReLU())
    return LiftedNetwork.from_module(module.double().eval(), (1, 12, 12))


def _truth() -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.linspace(0, 1, 12, dtype=torch.float64),
                            torch.linspace(0, 1, 12, dtype=torch.float64), indexing="ij")
    return (0.3 + 0.4 * torch.sin(3 * xx) * torch.cos(2 * yy)).reshape(1, 1, 12, 12)


def test_the_start_is_the_best_fitting_candidate_by_brute_force() -> None:
    net = _kinked_net()
    problem = problem_for(net, _truth(), alpha=1e-3, std=0.01)
    start = compute_backprojection_start(problem)
    v = net.layers[0].affine.adjoint(net.layers[1].affine.adjoint(problem.y_delta)
                                     .reshape(-1, 4, 12, 12)).reshape(1, 1, 12, 12)
    misfit = lambda x: float((net.forward(x) - problem.y_delta).pow(2).sum())  # noqa: E731
    candidates = [(c + s * v).clamp(0, 1) for c in (0.0, 0.5)
                  for s in torch.logspace(-4, 1, SCALES, dtype=torch.float64)]
    assert misfit(start) <= min(misfit(x) for x in candidates) + 1e-12
    assert misfit(start) < misfit(torch.zeros_like(start))
    assert float(start.mean()) > 0.3  # here a mid-grey candidate fits best: not the flat 0
