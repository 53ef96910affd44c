"""Graphs and cards whose lifting would cost far more than their few kilobytes.

Twin and Fibonacci residual additions lift to a network linear in their depth (terms of a
sum merged as they are made, diamonds turned into layers) and still compute the module's
function exactly; a concatenation too wide, a graph or card too deep are refused in one line
(exit 2) under 1 GiB at ``--memory-limit 300M``, before the walk that used to take minutes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from lbi_engine.errors import UnsupportedLayerError
from lbi_engine.models.graph_lifting import MAX_SUM_TERMS
from lbi_engine.models.network import LiftedNetwork
from tests.reliability import hostile_graphs as hg
from tests.reliability.bounded_cli import BoundedCli

GiB = 2**30


class _Diamonds(nn.Module):
    """``levels`` additions over shared states: "fib" v, w = w, v + w; "twin" w + conv(w)."""

    def __init__(self, levels: int, kind: str) -> None:
        super().__init__()
        self.levels, self.kind = levels, kind
        self.relu = nn.ReLU()
        self.conv = nn.Conv2d(1, 1, 3, padding=1)
        self.ident = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = self.relu(x)
        w = self.relu(self.conv(v))
        for _ in range(self.levels):
            if self.kind == "fib":
                v, w = w, v + w
            elif self.kind == "ident":
                w = w + self.ident(w)
            else:
                w = w + 0.5 * self.conv(w)
        return self.relu(w)


@pytest.mark.parametrize("kind", ["fib", "ident", "conv"])
def test_repeated_diamonds_lift_linearly_and_exactly(kind: str) -> None:
    torch.manual_seed(0)
    levels = 12
    module = _Diamonds(levels, kind).eval()
    net = LiftedNetwork.from_module(module, (1, 8, 8), verify=False)
    # concatenated sums would reach fib(12) = 144 or 2^12 terms; merged: a few per layer
    assert max(len(layer.extra) + 1 for layer in net.layers) <= 3
    assert len(net.layers) <= 2 * levels + 3
    x = torch.randn(4, 1, 8, 8)
    with torch.no_grad():
        want = module(x)
        got = net.forward(x)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-5 * float(want.abs().max()))


def test_a_value_added_to_itself_is_one_scaled_term() -> None:
    from lbi_engine.models.graph_lifting import GraphLifter, _Sum
    from lbi_engine.operators import LinearMap

    lifter = GraphLifter(torch.zeros(2, 3))
    w = LinearMap(torch.tensor([[1.0, 2.0, 0.0], [0.0, 1.0, -1.0], [3.0, 0.0, 1.0]]),
                  torch.tensor([0.5, -1.0, 2.0]))
    merged = lifter._merged([(0, w), (0, w), (0, w), (0, None)])
    assert [j for j, _ in merged] == [0, 0]
    x = torch.randn(5, 3)
    tripled = merged[0][1].apply(x)
    assert torch.allclose(tripled, 3 * w.apply(x), atol=1e-6)
    assert _Sum(merged).terms[1] == (0, None)


def test_a_concatenation_of_too_many_inputs_is_refused_naming_the_count() -> None:
    class Wide(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(torch.cat([x * float(k + 1) for k in range(MAX_SUM_TERMS + 1)],
                                        dim=1))

    with pytest.raises(UnsupportedLayerError, match=f"{MAX_SUM_TERMS + 1:,} inputs"):
        LiftedNetwork.from_module(Wide(), (1, 4, 4), verify=False)


def test_the_layer_bound_is_checked_while_lifting(monkeypatch) -> None:
    monkeypatch.setenv("LBI_MAX_LAYERS", "5")
    with pytest.raises(UnsupportedLayerError, match="more than 5 layers"):
        LiftedNetwork.from_module(_Diamonds(8, "conv").eval(), (1, 8, 8), verify=False)


@pytest.mark.timeout(300)
def test_small_hostile_graphs_and_cards_end_in_one_line_under_a_gib(
        tmp_path: Path, bounded: BoundedCli) -> None:
    cases = {
        "ladder": (hg.residual_ladder(tmp_path / "ladder.onnx", 1666), "1,667 activation"),
        "concat": (hg.wide_concat(tmp_path / "concat.onnx", 4000), "4,001 activation"),
        "card": (hg.deep_card(tmp_path / "deep.json", 5000), "more than 1,000 layers"),
    }
    for name, (path, said) in cases.items():
        assert path.stat().st_size < 600_000
        outcome = bounded.run("invert", "--network", path, "--sample", "0", "--max-iter", "2",
                              "--out", tmp_path / f"out-{name}", "--memory-limit", "300M",
                              "--quiet")
        assert outcome.is_one_line_refusal(), (name, outcome)
        assert said in outcome.err and path.name in outcome.err, outcome.err
        assert outcome.peak < GiB, (name, outcome.peak)
        assert not (tmp_path / f"out-{name}").exists()


@pytest.mark.timeout(300)
def test_a_twin_addition_onnx_is_lifted_or_refused_in_one_line(
        tmp_path: Path, bounded: BoundedCli) -> None:
    path = hg.fibonacci_adds(tmp_path / "fib.onnx", 22)
    outcome = bounded.run("invert", "--network", path, "--sample", "0", "--max-iter", "2",
                          "--out", tmp_path / "out", "--memory-limit", "300M", "--quiet")
    assert outcome.code == 0 or outcome.is_one_line_refusal(), outcome
    assert outcome.peak < 1.5 * GiB, outcome.peak
