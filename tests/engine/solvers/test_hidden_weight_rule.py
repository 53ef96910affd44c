"""The hidden-weight rule (MATH.md §5.7): which networks the alpha search may raise, and the
identity behind it, that the weighted lifted objective minimised over the hidden states is
the network's residual in the (I + M/w)^-1 norm, M = sum_l J_l J_l^T (J_l the Jacobian from
hidden state l to the output), checked against an independent least-squares minimisation."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lbi_engine.models.network import LiftedNetwork
from lbi_engine.models.rescale import AUTO_WEIGHT, rescaled
from lbi_engine.problem import InversionProblem
from lbi_engine.regularisers import make_regulariser
from lbi_engine.solvers.joint.hidden_weight import may_raise

F64 = torch.float64


def _relu_chain() -> tuple[nn.Sequential, LiftedNetwork]:
    """Positive weights and biases: on positive inputs every pre-activation is positive, so
    the network is affine there and each ReLU Bregman term is 1/2 ||x - z||^2."""
    torch.manual_seed(3)
    module = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 5), nn.ReLU(),
                           nn.Linear(5, 4), nn.ReLU()).double()
    with torch.no_grad():
        for layer in module[::2]:
            layer.weight.uniform_(0.1, 0.6)
            layer.bias.fill_(0.5)
    return module, LiftedNetwork.from_module(module, (6,))


def test_chains_and_graphs_with_a_scaling_hidden_state_may_be_raised() -> None:
    _, relu = _relu_chain()
    assert relu.is_chain and may_raise(relu)
    torch.manual_seed(0)
    tanh = LiftedNetwork.from_module(nn.Sequential(
        nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3)).double(), (6,))
    assert not may_raise(tanh)  # no hidden state whose activation scales
    one = LiftedNetwork.from_module(nn.Sequential(nn.Linear(6, 4), nn.ReLU()).double(), (6,))
    assert not may_raise(one)  # no hidden state at all


def test_the_api_marks_a_relu_chain_for_the_raise() -> None:
    from lbi_engine.api.running import hidden_weight_auto
    from lbi_engine.request import InversionRequest

    _, net = _relu_chain()
    x0 = torch.rand(1, 6, dtype=F64)
    problem = InversionProblem(net, net.forward(x0), make_regulariser("tikhonov"), 0.1)
    marked = hidden_weight_auto(problem, "joint", InversionRequest().solver_options(), None)
    assert marked.extras[AUTO_WEIGHT] == 1.0
    fixed = InversionRequest(method="joint", options={"hidden_weight": 1.0})
    assert AUTO_WEIGHT not in hidden_weight_auto(problem, "joint", fixed.solver_options(),
                                                  None).extras


def test_the_weighted_relaxation_measures_the_residual_in_the_discounted_norm() -> None:
    module, net = _relu_chain()
    (a1, b1), (a2, b2), (a3, b3) = [(m.weight.detach(), m.bias.detach()) for m in module[::2]]
    torch.manual_seed(1)
    x0 = torch.rand(1, 6, dtype=F64)
    y = (module(x0) + 0.05 * torch.randn(1, 4, dtype=F64)).detach()
    assert bool((y > 0).all())
    r = (y - module(x0).detach()).reshape(-1)
    jacobians = [a3 @ a2, a3]  # from x_1 and x_2 to the output, where the net is affine
    m = sum(j @ j.T for j in jacobians)
    for weight in (1.0, 10.0, 100.0):
        closed = 0.5 * r @ torch.linalg.solve(torch.eye(4, dtype=F64) + m / weight, r)
        # independent: the weighted quadratic minimised over (x_1, x_2) by least squares on
        # its stacked residual [sqrt(w)(x_1 - A_1 x_0 - b_1); sqrt(w)(x_2 - A_2 x_1 - b_2);
        # y - A_3 x_2 - b_3]
        s = weight ** 0.5
        eye = torch.eye(5, dtype=F64)
        zero54 = torch.zeros(5, 5, dtype=F64)
        lhs = torch.cat([torch.cat([s * eye, zero54], 1), torch.cat([-s * a2, s * eye], 1),
                         torch.cat([torch.zeros(4, 5, dtype=F64), -a3], 1)])
        rhs = torch.cat([s * (a1 @ x0[0] + b1), s * b2, b3 - y[0]])
        states = torch.linalg.lstsq(lhs, rhs[:, None]).solution[:, 0]
        x1, x2 = states[:5], states[5:]
        assert bool((x1 > 0).all() and (x2 > 0).all())  # inside the affine region
        # lbi's weighted objective (the rescaled network at the scaled states) there
        big = rescaled(net, weight) if weight != 1.0 else net
        problem = InversionProblem(big, y, make_regulariser("tikhonov"), 0.1)
        parts = problem.objective_parts(x0, [x1[None] * s, x2[None] * s])
        assert float(parts["bregman"].sum()) == \
            pytest.approx(float(closed), rel=1e-9, abs=1e-12)
    # the discount vanishes as w grows: the value tends to 1/2 ||r||^2
    assert float(closed) < 0.5 * float(r @ r)
    assert float(closed) > 0.5 * float(r @ r) * (1 - float(torch.linalg.matrix_norm(m, 2))
                                                  / 100.0)
