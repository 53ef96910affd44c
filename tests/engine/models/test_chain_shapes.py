"""The footprint's plain-Python shape rules (models/_chain_shapes) agree with the meta pass.

The meta pass (a batch pushed through the layers on torch's meta device) is the independent
computation: a ``nn.Sequential`` subclass is not taken by the fast path, so wrapping the same
layers in one runs the meta pass on identical modules.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from torch import nn

from lbi_engine.errors import ShapeMismatchError
from lbi_engine.models._chain_shapes import chain_output_sizes
from lbi_engine.models.cards import build_module
from lbi_engine.models.footprint import meta_footprint

ROOT = Path(__file__).resolve().parents[3]


class _MetaOnly(nn.Sequential):
    """Same layers, but not exactly nn.Sequential: meta_footprint takes the meta pass."""


def _both(layers: list[nn.Module], shape: tuple[int, ...]) -> tuple:
    fast = meta_footprint(nn.Sequential(*layers), shape, "test")
    meta = meta_footprint(_MetaOnly(*layers), shape, "test")
    return fast, meta


CASES = [
    ([nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(784, 7),
      nn.Tanh()], (1, 28, 28)),
    ([nn.Conv2d(3, 5, (3, 5), stride=(2, 1), padding=(0, 2), dilation=(2, 1)), nn.ELU(),
      nn.ConvTranspose2d(5, 2, 4, stride=3, padding=1, output_padding=2, dilation=2),
      nn.Sigmoid()], (3, 17, 13)),
    ([nn.ZeroPad2d((1, 2, 0, 3)), nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True),
      nn.MaxPool2d(2, stride=2, ceil_mode=True), nn.AdaptiveAvgPool2d((2, None)),
      nn.LeakyReLU(0.1)], (2, 11, 9)),
    # ceil_mode where the last window would start in the right padding: torch drops it
    ([nn.AvgPool2d(3, stride=3, padding=1, ceil_mode=True), nn.ReLU6()], (1, 5, 5)),
    ([nn.MaxPool2d(3, stride=2, padding=1, dilation=2), nn.Softplus(), nn.BatchNorm2d(2).eval(),
      nn.PReLU(2), nn.Flatten(), nn.Unflatten(1, (2, 5, 5)), nn.Hardtanh()], (2, 11, 11)),
    ([nn.Flatten(), nn.Linear(12, 6), nn.Softmax(dim=1), nn.Dropout(0.3), nn.GELU(),
      nn.Sequential(nn.Linear(6, 3), nn.SiLU()), nn.BatchNorm1d(3).eval()], (3, 4)),
]


@pytest.mark.parametrize("layers,shape", CASES)
def test_fast_path_counts_what_the_meta_pass_counts(layers, shape):
    assert chain_output_sizes(nn.Sequential(*layers), shape) is not None  # the fast path ran
    fast, meta = _both(layers, shape)
    assert fast == meta


@pytest.mark.parametrize("card", ["mnist-cnn-ae", "mnist-perceptron-ae", "circle-perceptron"])
def test_zoo_cards_take_the_fast_path_with_the_meta_counts(card):
    spec = json.loads((ROOT / "resources" / "models" / f"{card}.json").read_text())
    module = build_module(spec["architecture"]["layers"])
    shape = tuple(spec["input_shape"])
    assert chain_output_sizes(module, shape) is not None
    assert meta_footprint(module, shape, "t") == meta_footprint(_MetaOnly(*module), shape, "t")


@pytest.mark.parametrize("layers,shape", [
    ([nn.Flatten(), nn.Linear(10, 3)], (1, 3, 3)),  # 9 values, not 10
    ([nn.Conv2d(2, 3, 3)], (1, 8, 8)),  # channel mismatch
    ([nn.Conv2d(1, 3, 9)], (1, 8, 8)),  # kernel larger than the input
    ([nn.Unflatten(1, (2, 5))], (9,)),
])
def test_layers_that_do_not_fit_fall_back_to_the_meta_pass_and_its_error(layers, shape):
    assert chain_output_sizes(nn.Sequential(*layers), shape) is None
    with pytest.raises(ShapeMismatchError, match="layer"):
        meta_footprint(nn.Sequential(*layers), shape, "test")


def test_unknown_layers_and_custom_containers_are_left_to_the_meta_pass():
    assert chain_output_sizes(nn.Sequential(nn.Flatten(), nn.Bilinear(2, 2, 2)), (4,)) is None
    assert chain_output_sizes(_MetaOnly(nn.ReLU()), (4,)) is None
    assert chain_output_sizes(nn.Sequential(nn.Conv2d(1, 1, 3, padding="same")),
                              (1, 5, 5)) is None


def test_loading_the_zoo_cnn_imports_neither_sympy_nor_dynamo():
    """The start-up cost this module removes (issue #20): a fresh process that loads the
    default network must not import torch's symbolic-shape or compiler stacks."""
    code = ("import sys; from lbi_engine.models.zoo import load_zoo; load_zoo('mnist-cnn-ae'); "
            "print(sorted(m for m in ('sympy', 'torch._dynamo', 'torch._inductor') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env={"PYTHONPATH": str(ROOT),
                                                      "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def _segment_graph(meta_only: bool, width: int = 4) -> nn.Module:
    """A residual block joined to a concatenating branch, as an importer builds it."""
    from lbi_engine.models._graph_module import SegmentGraph

    class _MetaGraph(SegmentGraph):
        """Same segments and plan, but not exactly SegmentGraph: the meta pass."""

    segments = [nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU()),
                nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4).eval()),
                nn.Sequential(nn.ReLU(), nn.MaxPool2d(3, 2, padding=1)),
                nn.Sequential(nn.Conv2d(4, width, 1), nn.ReLU())]
    plan = [("seq", (0,), 0), ("seq", (1,), 1), ("add", (1, 2), -1), ("seq", (3,), 2),
            ("seq", (4,), 3), ("cat", (4, 5), -1)]
    return (_MetaGraph if meta_only else SegmentGraph)(segments, plan)


def test_an_importers_graph_takes_the_fast_path_with_the_meta_counts():
    from lbi_engine.models._chain_shapes import graph_output_sizes

    shape = (3, 15, 17)
    fast = meta_footprint(_segment_graph(False), shape, "test")
    meta = meta_footprint(_segment_graph(True), shape, "test")
    assert graph_output_sizes(_segment_graph(False), shape) is not None
    assert graph_output_sizes(_segment_graph(True), shape) is None
    assert fast == meta and fast.activations > 3 * 15 * 17


def test_a_graph_whose_merge_does_not_fit_is_left_to_the_meta_pass_and_its_error():
    from lbi_engine.models._chain_shapes import graph_output_sizes

    net = _segment_graph(False)
    net.plan[-1] = ("add", (3, 5), -1)  # 4 channels at 8x8 and at 4x4 (pooled): no sum
    assert graph_output_sizes(net, (3, 8, 8)) is None
    with pytest.raises(ShapeMismatchError):
        meta_footprint(net, (3, 8, 8), "test")
