"""The hidden-layer weight by exact rescaling (MATH.md §5.7, lbi_engine/models/rescale.py):
the rescaled network has the same forward, its hidden states are the original's times c, and
its lifted objective at the scaled states is the original's with every hidden Bregman term
times c^2 (the last one and the prior unchanged). Checked on torchvision's residual,
inverted-residual (ReLU6 = clip) and Fire (concatenation) blocks and on a chain with tanh."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lbi_engine.errors import InputError
from lbi_engine.models.network import LiftedNetwork
from lbi_engine.models.rescale import (
    AUTO_WEIGHT,
    can_raise,
    rescaled,
    resolve_hidden_weight,
    state_scales,
)
from lbi_engine.problem import InversionProblem
from lbi_engine.regularisers import make_regulariser
from lbi_engine.settings.solver import SolverOptions
from tests.engine.models.test_graph_networks import _blocks, _randomise_bn

F64 = torch.float64


def _nets() -> dict[str, LiftedNetwork]:
    pytest.importorskip("torchvision")
    nets = {}
    for name, (module, shape) in _blocks().items():
        nets[name] = LiftedNetwork.from_module(_randomise_bn(module).double(), shape)
    torch.manual_seed(5)
    chain = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 5), nn.Tanh(),
                          nn.Linear(5, 4), nn.LeakyReLU(0.1), nn.Linear(4, 3)).double()
    nets["chain-tanh"] = LiftedNetwork.from_module(chain, (6,))
    return nets


@pytest.mark.parametrize("name", ["resnet-basic", "mobilenet-inverted", "squeezenet-fire",
                                  "resnet-stem", "chain-tanh"])
def test_rescaled_network_has_the_same_forward_and_weighted_bregman_terms(name):
    net = _nets()[name]
    weight = 49.0
    scales = state_scales(net, weight)
    assert scales[0] == 1.0 and scales[-1] == 1.0
    big = rescaled(net, weight)
    assert rescaled(net, weight) is big  # cached per network and weight
    x = torch.rand(2, *net.input_shape, dtype=F64, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(big(x), net(x), rtol=1e-12, atol=1e-12)
    states = net.forward_states(x)
    for c, mine, theirs in zip(scales[1:], big.forward_states(x), states, strict=True):
        assert torch.allclose(mine, c * theirs, rtol=1e-12, atol=1e-12)
    # at perturbed states (every Bregman term > 0) the rescaled objective weights the hidden
    # terms by c^2, the last one by 1
    g = torch.Generator().manual_seed(2)
    aux = [s + 0.3 * torch.rand(s.shape, dtype=F64, generator=g) for s in states[:-1]]
    y = states[-1] + 0.1
    reg = make_regulariser("tv") if len(net.input_shape) == 3 else make_regulariser("tikhonov")
    plain = InversionProblem(net, y, reg, 0.1).objective_parts(x, aux)
    weighted = InversionProblem(big, y, reg, 0.1).objective_parts(
        x, [c * a for c, a in zip(scales[1:-1], aux, strict=True)])
    want = plain["bregman"] * torch.tensor(
        [c * c for c in scales[1:]], dtype=F64)
    assert torch.allclose(weighted["bregman"], want, rtol=1e-10, atol=1e-12)
    assert torch.allclose(weighted["reg"], plain["reg"])


def test_only_homogeneous_hidden_states_are_scaled():
    net = _nets()["chain-tanh"]
    # relu, tanh, leaky relu, identity (last): tanh cannot carry a scale
    assert state_scales(net, 100.0) == [1.0, 10.0, 1.0, 10.0, 1.0]
    mobile = _nets()["mobilenet-inverted"]
    clip = rescaled(mobile, 4.0).layers[0].activation
    assert clip.spec() == {"name": "clip", "lo": 0.0, "hi": 12.0}  # ReLU6 times 2


def test_auto_is_the_papers_weight_unless_raised_and_only_graphs_may_be_raised():
    nets = _nets()
    assert resolve_hidden_weight("auto") == 1.0
    assert resolve_hidden_weight("auto", {AUTO_WEIGHT: 100.0}) == 100.0
    assert can_raise(nets["resnet-basic"]) and not can_raise(nets["chain-tanh"])
    assert rescaled(nets["chain-tanh"], 1.0) is nets["chain-tanh"]
    assert resolve_hidden_weight(30) == 30.0
    for bad in (0, -1, float("nan"), 1e7):
        with pytest.raises(InputError, match="hidden_weight"):
            SolverOptions(hidden_weight=bad)
    with pytest.raises(InputError, match="hidden_weight"):
        SolverOptions(hidden_weight="heavy")
    assert SolverOptions(hidden_weight=100).hidden_weight == 100


def test_a_warm_start_continues_the_weighted_joint_run():
    """The border translation (states times c in, divided by c out; the accelerated method's
    previous iterate likewise) lets a warm-started run continue the same iteration."""
    from lbi_engine.solvers import StopRule, final, solve, warm_start
    from tests.engine.models.test_graph_networks import _problem, _small

    problem = _problem(_small("residual"))
    weighted = {"hidden_weight": 100.0}
    straight = final(solve(problem, "joint", stop=StopRule(max_iter=60, tol=0),
                           options=weighted))
    first = final(solve(problem, "joint", stop=StopRule(max_iter=25, tol=0), options=weighted))
    resumed = final(solve(problem, "joint", stop=StopRule(max_iter=35, tol=0),
                          init=warm_start(first.to_numpy(), problem), options=weighted))
    assert straight.hidden_weight == 100.0 and resumed.iteration == 60
    torch.testing.assert_close(resumed.x, straight.x, rtol=1e-10, atol=1e-12)
    for a, b in zip(resumed.aux, straight.aux, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    # the records hold the network's own states (near its forward at x), not the rescaled
    # network's (ten times larger)
    own = problem.network.forward_states(straight.x)[0]
    big = rescaled(problem.network, 100.0).forward_states(straight.x)[0]
    assert (straight.aux[0] - own).norm() < 0.1 * (straight.aux[0] - big).norm()


def test_the_api_marks_graph_runs_for_the_raise_and_a_warm_restart_keeps_its_weight():
    from lbi_engine.api.running import hidden_weight_auto
    from lbi_engine.request import InversionRequest
    from tests.engine.models.test_graph_networks import _problem, _small

    graph = _problem(_small("residual"))
    options = InversionRequest().solver_options()
    assert hidden_weight_auto(graph, "joint", options, None).extras[AUTO_WEIGHT] == 1.0
    # a record's to_numpy() (what the window hands back) with the weight it ran with
    assert hidden_weight_auto(graph, "joint", options, {"hidden_weight": 100.0}) \
        .extras[AUTO_WEIGHT] == 100.0
    fixed = InversionRequest(method="joint", options={"hidden_weight": 30}).solver_options()
    assert AUTO_WEIGHT not in hidden_weight_auto(graph, "joint", fixed, None).extras
    assert AUTO_WEIGHT not in hidden_weight_auto(graph, "layerwise", options, None).extras
