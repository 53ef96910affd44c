"""The compiled prox of tanh and sigmoid (``kernels.activation_prox``) used by the joint method.

Checked against the prox's optimality condition written independently of both solvers
(u - v + t psi'(u) = 0 with psi'(u) = atanh(u) - u for tanh, logit(u) - u for sigmoid), and
against the activations' own torch prox to rounding, over steps below, at and above 1 and
inputs from saturation to 0; and that the joint method takes it for tanh blocks and ends
where the torch prox's run ends.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lbi_engine.activations import Sigmoid, Tanh

pytest.importorskip("numba")

F64 = torch.float64


def _inputs(dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    v = torch.randn(3, 400, generator=g, dtype=F64) * 3.0
    v[0, :5] = torch.tensor([0.0, 1e-9, -40.0, 40.0, 7.5], dtype=F64)  # 0, tiny, saturated
    return v.to(dtype)


@pytest.mark.parametrize("activation", [Tanh(), Sigmoid()], ids=["tanh", "sigmoid"])
@pytest.mark.parametrize("t", [0.05, 0.37, 1.0, 2.5])
def test_compiled_prox_solves_the_optimality_condition_and_matches_torch(activation, t):
    from lbi_engine.solvers.kernels.activation_prox import compiled_prox

    v = _inputs(F64)
    prox = compiled_prox(activation, v)
    assert prox is not None
    u = v.clone()
    prox(u, t)
    assert torch.allclose(u, activation.prox(v, t), rtol=0, atol=4e-15)
    if isinstance(activation, Tanh):
        inside, dpsi = u.abs() < 1 - 1e-9, lambda w: torch.atanh(w) - w
    else:
        inside, dpsi = (u > 1e-9) & (u < 1 - 1e-9), lambda w: torch.logit(w) - w
    residual = u - v + t * dpsi(u)
    # |d residual / du| = 1 + t (psi'' ) grows as u nears the bounds: compare relative to it
    scale = 1 + t / (1 - u.abs()).clamp_min(1e-12) if isinstance(activation, Tanh) else \
        1 + t / (u * (1 - u)).clamp_min(1e-12)
    assert float((residual / scale)[inside].abs().max()) <= 1e-13
    # a strided (B, n) view, as the joint step passes a block's columns of its buffer,
    # started at the last call's roots (those of v) for a moved v: the same root
    moved = v + 0.1 * torch.sin(torch.arange(400, dtype=F64))
    w = torch.cat([moved, moved], dim=1)
    prox(w[:, 400:], t)
    assert torch.allclose(w[:, 400:], activation.prox(moved, t), rtol=0, atol=4e-15)
    assert torch.equal(w[:, :400], moved)


def test_compiled_prox_float32_matches_torch_to_float32_rounding():
    from lbi_engine.solvers.kernels.activation_prox import compiled_prox

    v = _inputs(torch.float32)
    for activation in (Tanh(), Sigmoid()):
        u = v.clone()
        prox = compiled_prox(activation, v)
        assert prox is not None
        prox(u, 0.3)
        assert float((u - activation.prox(v, 0.3)).abs().max()) <= 4e-7


def test_compiled_prox_refuses_other_activations_and_numba_off(monkeypatch):
    from lbi_engine.activations import ReLU
    from lbi_engine.solvers.kernels.activation_prox import compiled_prox

    like = torch.zeros(1, 3)
    assert compiled_prox(ReLU(), like) is None
    assert compiled_prox(Tanh(), like.to(torch.float16)) is None
    monkeypatch.setenv("LBI_NO_NUMBA", "1")
    assert compiled_prox(Tanh(), like) is None


def test_joint_method_with_tanh_blocks_uses_it_and_ends_where_the_torch_prox_ends(
        monkeypatch):
    from lbi_engine.models.network import LiftedNetwork
    from lbi_engine.problem import InversionProblem
    from lbi_engine.regularisers import make_regulariser
    from lbi_engine.solvers import StopRule, final, solve
    from lbi_engine.solvers.joint import fista as _joint_accel

    torch.manual_seed(2)
    module = nn.Sequential(nn.Conv2d(1, 3, 3), nn.Tanh(), nn.AvgPool2d(2), nn.Flatten(),
                           nn.Linear(3 * 3 * 3, 8), nn.Tanh(), nn.Linear(8, 5)).double()
    network = LiftedNetwork.from_module(module, (1, 8, 8))
    x_true = torch.rand(1, 1, 8, 8, dtype=F64)
    y = network.forward(x_true) + 0.01 * torch.randn(1, 5, dtype=F64)

    def run() -> torch.Tensor:
        problem = InversionProblem(network, y, make_regulariser("tv"), 0.01)
        return final(solve(problem, "joint", stop=StopRule(max_iter=150, tol=0))).x

    used: list[object] = []
    real = _joint_accel._compiled_aux_proxes

    def spy(layers, like):
        found = real(layers, like)
        used.extend(found)
        return found

    monkeypatch.setattr(_joint_accel, "_compiled_aux_proxes", spy)
    compiled = run()
    assert used and all(p is not None for p in used)
    monkeypatch.setattr(_joint_accel, "_compiled_aux_proxes",
                        lambda layers, like: [None] * (len(layers) - 1))
    reference = run()
    assert torch.allclose(compiled, reference, rtol=0, atol=1e-10)
