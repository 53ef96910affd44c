"""The continuation path's forward map: lbi's translation of a file's graph where it agrees
with the lifted forward, the lifted layers otherwise.

Checked against the lifted network itself (the exact ReLU rewrite of max-pooling gives the
same map, so both forwards and their gradients agree at points where no pooling window is
tied), and against a module that does not compute the same map (refused).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lbi_engine.models.network import LiftedNetwork
from lbi_engine.solvers.alpha import continuation, exact_forward
from tests.engine._solver_cases import problem_for


def _module() -> nn.Module:
    torch.manual_seed(5)
    return nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(),
                         nn.MaxPool2d(3, 2, padding=1),
                         nn.Conv2d(6, 4, 3, padding=1), nn.ReLU()).eval()


def _onnx_network(tmp_path) -> LiftedNetwork:
    path = tmp_path / "pool.onnx"
    torch.onnx.export(_module(), (torch.rand(1, 3, 12, 12),), str(path))
    return LiftedNetwork.from_onnx(path)


def _problem(network: LiftedNetwork):
    truth = torch.rand(1, 3, 12, 12, generator=torch.Generator().manual_seed(0))
    return problem_for(network, truth, alpha=1e-3, std=0.01)


def test_a_file_network_keeps_its_translation_and_the_path_uses_it(tmp_path) -> None:
    network = _onnx_network(tmp_path)
    assert network.rewrites  # the max-pool was rewritten as ReLU layers ...
    assert network.reference is not None  # ... and lbi's translation still pools
    problem = _problem(network)
    start = torch.full_like(problem.zeros_input(), 0.5)
    forward, source = exact_forward.exact_forward(problem, start)
    assert source == "translated module"
    x = torch.rand(2, 3, 12, 12, generator=torch.Generator().manual_seed(1),
                   requires_grad=True)
    a, b = forward(x), network.forward(x)
    assert float((a - b).detach().abs().max()) <= 1e-5 * float(b.detach().abs().max())
    ga, = torch.autograd.grad(a.square().sum(), x)
    gb, = torch.autograd.grad(b.square().sum(), x)
    assert float((ga - gb).abs().max()) <= 1e-4 * float(gb.abs().max())


def test_the_translation_survives_a_cast_and_the_hidden_weight(tmp_path) -> None:
    from lbi_engine.models.rescale import rescaled

    network = _onnx_network(tmp_path).to(dtype=torch.float64)
    assert network.reference is not None
    x = torch.rand(1, 3, 12, 12, dtype=torch.float64)
    assert torch.allclose(network.reference(x), network.forward(x), rtol=1e-10, atol=1e-12)
    heavy = rescaled(network, 100.0)
    assert heavy.reference is network.reference
    assert torch.allclose(heavy.forward(x), network.forward(x), rtol=1e-9, atol=1e-12)


def test_a_translation_that_disagrees_is_not_used(tmp_path) -> None:
    network = _onnx_network(tmp_path)
    wrong = _module()
    with torch.no_grad():
        wrong[0].bias.add_(0.1)  # another map
    network.reference = wrong
    problem = _problem(network)
    start = torch.full_like(problem.zeros_input(), 0.5)
    forward, source = exact_forward.exact_forward(problem, start)
    assert source == "lifted layers"
    assert forward == network.forward


def test_a_network_lifted_from_a_python_module_uses_its_lifted_layers() -> None:
    network = LiftedNetwork.from_module(_module(), (3, 12, 12))
    assert network.reference is None
    problem = _problem(network)
    _, source = exact_forward.exact_forward(problem, torch.full_like(problem.zeros_input(), .5))
    assert source == "lifted layers"


def test_the_path_ends_alike_through_either_forward(tmp_path, monkeypatch) -> None:
    """Either forward gives the path the same problem: the same rule ends it, at residuals
    and PSNRs that differ by little. Not by rounding only: at the flat start every pooling
    window is tied, and max_pool2d's gradient picks one element of a tie where the ReLU
    rewrite's picks another (both subgradients), so the first alpha (from the gradient
    there) and the first L-BFGS steps differ. And result.json says which forward ran."""
    from lbi_engine.settings.solver import StopRule
    from lbi_engine.solvers import solve

    problem = _problem(_onnx_network(tmp_path))

    def path_solve(p, init, path_tol=None):
        return solve(p, "joint", stop=StopRule(max_iter=50, tol=1e-4), init=init)

    ends = {}
    for agree in (exact_forward.AGREE, -1.0):  # -1: nothing agrees, the lifted layers run
        monkeypatch.setattr(exact_forward, "AGREE", agree)
        last = list(continuation.stream_continuation(problem, path_solve,
                                                     noise_std=0.01))[-1]
        ends[last.choice.path_forward] = last
    assert set(ends) == {"translated module", "lifted layers"}
    a, b = ends.values()
    assert a.choice.rule == b.choice.rule
    # the path's ends (the lifted solve after them runs a few steps from either)
    end_a, end_b = a.choice.path[-1], b.choice.path[-1]
    assert end_a["discrepancy"] == pytest.approx(end_b["discrepancy"], rel=0.05)
    assert end_a["psnr"] == pytest.approx(end_b["psnr"], abs=1.0)
