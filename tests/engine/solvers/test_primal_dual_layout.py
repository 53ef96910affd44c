"""Where the Condat–Vũ block puts its iterate slots: the change dx (written by W^T r) half a
page from W modulo 4 KiB, zero-filled, contiguous, and the iterates the same as with slots
wherever the allocator puts them."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lbi_engine.models.network import LiftedNetwork
from lbi_engine.problem import InversionProblem
from lbi_engine.regularisers import make_regulariser
from lbi_engine.settings.solver import SolverOptions
from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.base import StopRule
from lbi_engine.solvers.one_layer import primal_dual as _primal_dual
from lbi_engine.solvers.one_layer.inplace import dense_matrix
from lbi_engine.solvers.one_layer.primal_dual import PAGE, PrimalDualBlock, _off_the_page_of


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(2, 1, 1, 8, 8), (2, 3, 100), (2, 5, 2, 7, 9)])
def test_the_second_half_starts_half_a_page_from_the_weight(dtype: torch.dtype,
                                                            shape: tuple[int, ...]) -> None:
    for offset in (0, 1, 17, 300):  # weights at several addresses
        weight = torch.randn(4000, dtype=dtype)[offset:offset + 600].view(20, 30)
        slots = _off_the_page_of(weight, shape, dtype, 1)
        assert slots.shape == shape and slots.dtype == dtype and slots.is_contiguous()
        assert not bool(slots.any())
        assert (slots[1].data_ptr() - weight.data_ptr()) % PAGE == PAGE // 2


def _problem() -> InversionProblem:
    torch.manual_seed(3)
    module = nn.Sequential(nn.Flatten(), nn.Linear(100, 40), nn.ReLU())
    net = LiftedNetwork.from_module(module, (1, 10, 10))
    y = net.forward(torch.rand(2, 1, 10, 10)).clamp_min(0)
    return InversionProblem(net, y, make_regulariser("tv"), 0.02)


def test_the_block_places_dx_so_and_iterates_do_not_depend_on_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    problem = _problem()
    options = SolverOptions.from_dict({"steps": "balanced"})

    def run() -> PrimalDualBlock:
        block = PrimalDualBlock(problem.network.layers[0], problem, options,
                                problem.zeros_input())
        monitor = RunMonitor(problem, "pdhg", StopRule(max_iter=100), None, 100)
        for _ in range(60):
            block.step(problem.y_delta, monitor)
        return block

    placed = run()
    dense = dense_matrix(problem.network.layers[0].affine)
    assert dense is not None
    for slot in placed._xp:
        assert (slot[1].data_ptr() - dense[0].data_ptr()) % PAGE == PAGE // 2
    monkeypatch.setattr(_primal_dual, "_off_the_page_of",
                        lambda weight, shape, dtype, half: torch.zeros(shape, dtype=dtype))
    anywhere = run()
    assert torch.equal(placed.x, anywhere.x) and float(placed.x.abs().max()) > 0
    assert placed.z is not None and anywhere.z is not None
    assert torch.equal(placed.z, anywhere.z)
