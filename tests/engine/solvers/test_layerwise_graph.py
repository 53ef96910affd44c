"""Layer-wise inversion over a graph of lifted layers (MATH.md §5.6, docs/LAYERWISE.md).

The stage for state j minimises the sum of the Bregman losses of every node that reads x_j,
against the current estimates of its output and of its other inputs, plus the weighted
Gaussian feature prior, over dom Psi_j. That problem is convex; cvxpy, written here from the
definitions (dense matrices, Sigma inverted densely), gives its exact minimum. On a chain the
graph's code must run the chain's iterates exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lbi_engine.errors import InputError
from lbi_engine.solvers import StopRule, final, solve
from lbi_engine.solvers._feature_stage import ConsumerStage
from lbi_engine.solvers.layerwise import _consumers, run_layerwise
from tests.engine._solver_cases import cvx_bregman, cvx_solve, with_feature_prior
from tests.engine.models.test_graph_networks import _problem, _small, cvx_pre_activation


def _dense_precision(prior: object) -> np.ndarray:
    u = prior.factor.double().numpy()
    p = np.linalg.inv(u @ u.T + np.diag(prior.diag.double().numpy()))
    return 0.5 * (p + p.T)


def _cvx_stage(net: object, states: list[np.ndarray], j: int, prior: object,
               weight: float) -> tuple[float, np.ndarray]:
    """min over v of sum_{l reads j} B_{Psi_l}(x_{l+1}, sum_k A_{l,k} (v if k == j else x_k)
    + b_{l,k}) + w/2 (v - mu)^T Sigma^{-1} (v - mu), v in dom Psi_j."""
    import cvxpy as cp

    below = net.layers[j - 1].activation.name
    v = cp.Variable(states[j].size, nonneg=below == "relu")
    objective = 0
    for i, layer in enumerate(net.layers):
        terms = net.terms(i)
        if all(k != j for k, _ in terms):
            continue
        z = cvx_pre_activation(terms, j, v, states)
        objective += cvx_bregman(layer.activation.name, states[i + 1], z)
    mu = prior.mean.double().numpy()
    objective += weight / 2 * cp.quad_form(v - mu, cp.psd_wrap(_dense_precision(prior)))
    return cvx_solve(objective), v.value


@pytest.mark.parametrize("kind", ["residual", "concat"])
def test_every_graph_stage_is_the_cvxpy_minimiser_of_its_consumers_losses(kind: str) -> None:
    """Each stage of a residual node (x_1 read by the block's first layer and by the addition,
    whose other input is x_2) and of a concatenation (x_1 read by both branches; a branch's
    output read by the concatenation beside the other branch) against cvxpy."""
    pytest.importorskip("cvxpy")
    net = _small(kind)
    problem = with_feature_prior(_problem(net), rank=6)
    g = torch.Generator().manual_seed(5)
    x0 = torch.rand(1, 1, 4, 4, generator=g, dtype=torch.float64)
    # states off the forward pass (as the estimates of a run are), inside dom Psi
    states = [x0] + [net.layers[i].activation.project(
        s + 0.3 * torch.randn(s.shape, generator=g, dtype=torch.float64))
        for i, s in enumerate(net.forward_states(x0))]
    weight = 0.05
    merged = 0
    for j in range(1, len(net.layers)):
        consumers = _consumers(net, j, states)
        merged += len(consumers) > 1 or any(c.offset is not None for c in consumers)
        prior = problem.feature_priors.layers[j - 1]
        stage = ConsumerStage(consumers, net.layers[j - 1].activation, prior,
                              torch.tensor([weight], dtype=torch.float64), 0.0, 1.0,
                              prior.mean_like(states[j]))
        for _ in range(30000):
            x_new = stage.step()
            moved = float((x_new - stage.x).norm())
            stage.accept(x_new)
            if moved < 1e-13:
                break
        value, want = _cvx_stage(net, [s.reshape(-1).numpy() for s in states], j, prior, weight)
        parts = stage.objective(stage.x)
        assert abs(float(parts["bregman"][0] + parts["reg"][0]) - value) <= 1e-7 * abs(value)
        got = stage.x.reshape(-1).numpy()
        np.testing.assert_allclose(got, want, atol=1e-5 * max(1.0, np.abs(want).max()))
        # the table's terms are each consumer's own Bregman loss
        assert torch.allclose(parts["terms"].sum(dim=1), parts["bregman"])
    assert merged >= 2  # nodes that merge (several readers, or another input) were exercised


@pytest.mark.parametrize("kind", ["residual", "concat"])
def test_a_graph_layerwise_run_reports_every_stage_and_solves_each(kind: str) -> None:
    """Two backward sweeps (a node reads an earlier state beside x_j); each stage of each sweep
    is the cvxpy minimiser at the estimates it read: the later states' estimates of its own
    sweep, the earlier ones' of the sweep before (the first sweep: the forward states of the
    back-projection start, as the run documents), the input's back-projection."""
    pytest.importorskip("cvxpy")
    from lbi_engine.solvers.joint.start import backprojection_start

    net = _small(kind)
    problem = _problem(net)
    problem.delta = torch.tensor([0.01 * 8 ** 0.5], dtype=torch.float64)
    problem = with_feature_prior(problem, rank=6)
    records = list(solve(problem, "layerwise", stop=StopRule(max_iter=40000, tol=1e-11),
                         options={"input_alpha": "given"}, report_every=200))
    last = records[-1]
    depth = len(net.layers)
    summary = last.extras["stages"]
    names = [[f"layer {k}/{depth} (sweep {s}/2)" for k in range(depth, 1, -1)] for s in (1, 2)]
    assert [s["stage"] for s in summary] == [*names[0], *names[1], f"layer 1/{depth}"]
    assert all(s["stop_reasons"] == ["tolerance"] for s in summary)
    assert {r.stage for r in records} == {s["stage"] for s in summary}
    guess = backprojection_start(problem)
    after = [[r for r in records if r.stage == names[0][-1]][-1].aux, last.aux]
    before = [net.forward_states(guess)[:-1], after[0]]
    weight = float(problem.delta[0]) ** 2 / 8
    for sweep in (0, 1):
        for j in range(depth - 1, 0, -1):
            states = [guess] + [after[sweep][k - 1] if k >= j else before[sweep][k - 1]
                                for k in range(1, depth)] + [problem.y_delta]
            states = [s.reshape(-1).numpy() for s in states]
            _, want = _cvx_stage(net, states, j, problem.feature_priors.layers[j - 1], weight)
            got = after[sweep][j - 1].reshape(-1).numpy()
            np.testing.assert_allclose(got, want, atol=1e-4 * max(1.0, np.abs(want).max()))
            readers = [i + 1 for i in range(depth) if any(k == j for k, _ in net.terms(i))]
            assert summary[sweep * (depth - 1) + depth - 1 - j]["consumers"] == readers


def test_a_graph_whose_input_feeds_a_shortcut_is_refused_in_one_line() -> None:
    from torch import nn

    from lbi_engine.models.network import LiftedNetwork
    from tests.engine.models.test_graph_networks import _ResBlock

    torch.manual_seed(0)
    net = LiftedNetwork.from_module(nn.Sequential(nn.Flatten(), _ResBlock(16),
                                                  nn.Linear(16, 8)).double(), (1, 4, 4))
    problem = _problem(net)
    problem.delta = torch.tensor([0.03], dtype=torch.float64)
    problem = with_feature_prior(problem, rank=4)
    with pytest.raises(InputError, match="input is read 2 times.*use method 'joint'") as info:
        next(iter(solve(problem, "layerwise")))
    assert "\n" not in str(info.value)


def test_a_chain_runs_the_same_iterates_by_the_graph_code() -> None:
    """mnist-cnn-ae with its shipped feature prior, input alpha by quasi-optimality: the
    graph's stages (one reader per state, no offset) make the chain's result to the bit."""
    from lbi_engine.api import InversionRequest, prepare
    from lbi_engine.models.zoo import load_zoo
    from lbi_engine.settings.solver import SolverOptions

    request = InversionRequest(network="mnist-cnn-ae", regulariser="tv", split="val", index=7,
                               noise_std=0.05, method="layerwise")
    problem = prepare(request, load_zoo("mnist-cnn-ae")).problem
    stop = StopRule(max_iter=600, tol=1e-4, tol_mode="relative")
    results = [final(run_layerwise(problem, stop, SolverOptions(), None, None, 50, graph=g))
               for g in (False, True)]
    chain, graph = results
    assert torch.equal(chain.x, graph.x)
    assert [torch.equal(a, b) for a, b in zip(chain.aux, graph.aux, strict=True)] == [True] * 2
    assert chain.choice.alpha == graph.choice.alpha
    assert [s["iterations"] for s in chain.extras["stages"]] == \
        [s["iterations"] for s in graph.extras["stages"]]
