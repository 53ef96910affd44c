"""The max-pool rewrite is charged to the memory budget before it is built.

A pool's output is small, its exact ReLU rewrite (lifted units at every level of the tree,
selection weights of (units x window) per channel) need not be: a 3x3 stride-1 pool on
32 x 192 x 192 becomes 18.6 M lifted units, a 100 x 100 window 300 M weights. The closed
forms of :func:`rewrite_size` are checked against the rewrite actually built, then the
hostile files are refused in one line under 1 GiB at ``--memory-limit 300M``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from lbi_engine.limits import MemoryLimitError
from lbi_engine.models.footprint import check_rewrite_memory, meta_footprint
from lbi_engine.models.maxpool_relu import _levels, maxpool_as_relu, rewrite_size
from tests.reliability import hostile_graphs as hg

GiB = 2**30


@pytest.mark.parametrize(("kernel", "stride", "hw"), [
    ((2, 2), None, (8, 8)), ((3, 3), (2, 2), (9, 9)), ((3, 3), (1, 1), (7, 7)),
    ((5, 3), (1, 2), (11, 10)), ((4, 4), (4, 4), (8, 8)), ((7, 1), (1, 1), (9, 4))])
def test_rewrite_size_counts_what_the_rewrite_builds(kernel, stride, hw) -> None:
    pool = nn.MaxPool2d(kernel, stride)
    rewritten = maxpool_as_relu(pool, 3, in_hw=hw)
    x = torch.randn(2, 3, *hw)
    units, y = 0, x
    for layer in rewritten:
        y = layer(y)
        if isinstance(layer, nn.ReLU):
            units += y[0].numel()
    weights = sum(p.numel() for p in rewritten.parameters())
    assert rewrite_size(pool, (3, *hw)) == (units, weights)
    assert torch.allclose(y, pool(x), atol=1e-6)  # and it still is the max-pool


def test_the_tree_matrices_select_pairs_exactly() -> None:
    """Brute force: the levels' matrices compute max over every window of 1..9 values."""
    rng = np.random.default_rng(0)
    for n in range(2, 10):
        v = torch.tensor(rng.standard_normal((50, n)))
        relus = v  # each level's units read the last level's ReLUs (the features at first)
        levels = _levels(n)
        for units, _ in levels:
            relus = torch.relu(relus @ units.T)
        top = relus @ levels[-1][1].T  # the last combination: the window's maximum
        assert torch.allclose(top[:, 0], v.max(dim=1).values, atol=1e-12)


def test_a_card_pool_is_charged_its_rewrite(monkeypatch) -> None:
    chain = nn.Sequential(nn.ReLU(), nn.MaxPool2d(3, 1)).eval()
    fp = meta_footprint(chain, (32, 192, 192), "card")
    assert fp.pool_units == 32 * (192 * 190 + 190 * 190) * 8  # 18.6 M, rows then columns
    assert fp.activations > fp.pool_units
    monkeypatch.setenv("LBI_MEMORY_LIMIT", "300M")
    with pytest.raises(MemoryLimitError, match="max-pool 'pool'.*lifted units"):
        check_rewrite_memory(nn.MaxPool2d(100), (1, 100, 100), "pool")


@pytest.mark.timeout(300)
def test_hostile_pools_end_in_one_line_under_a_gib(tmp_path: Path, bounded) -> None:
    cases = {
        "card64": (hg.pool_card(tmp_path / "c64.json", (1, 64, 64), 64, 64), (1, 64, 64),
                   "lifted units"),
        "card3": (hg.pool_card(tmp_path / "c3.json", (32, 192, 192), 3, 1), (32, 192, 192),
                  "max-pools: 18,580,480 lifted units"),
        "onnx3": (hg.pool_onnx(tmp_path / "o3.onnx", (32, 192, 192), 3, 1), (32, 192, 192),
                  "layer 'pool'"),
        "onnx100": (hg.pool_onnx(tmp_path / "o100.onnx", (1, 100, 100), 100, 100),
                    (1, 100, 100), "ReLU rewrite of max-pool"),
    }
    for name, (path, shape, said) in cases.items():
        assert path.stat().st_size < 1000
        truth = tmp_path / f"{name}.npy"
        np.save(truth, np.zeros(shape, dtype=np.float32))
        outcome = bounded.run("invert", "--network", path, "--truth", truth, "--max-iter", "2",
                              "--out", tmp_path / f"out-{name}", "--memory-limit", "300M",
                              "--quiet")
        assert outcome.is_one_line_refusal(), (name, outcome)
        assert said in outcome.err and "300.0 MiB" in outcome.err, (name, outcome.err)
        assert outcome.peak < GiB, (name, outcome.peak)
