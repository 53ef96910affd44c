"""Channel permutations (channel shuffle), channel splits, concatenations and max-pools in
both export formats (ONNX, .pt2): lifted as 1x1 selection convolutions and graph branches.

* ``permutation_of`` finds torch's own ``nn.ChannelShuffle`` and rejects what is not a pure
  channel permutation; the selection convolution equals indexing and its lifted adjoint
  passes the adjoint test;
* exported blocks (ShuffleNet units, a dense block, an encoder-decoder skip, an inception
  block with torchvision's ceil-mode max-pool, uneven splits) lift with the lifted forward
  equal to torch's in float64;
* max-pool in every padding / ceil / dilation mode after a ReLU lifts from both formats; a
  non-proximal activation is refused with the operation named.
"""

from __future__ import annotations

import contextlib
import io
import warnings

import pytest
import torch
from torch import nn

from lbi_engine.models._channel_ops import permutation_of, sections, selection_conv, split_pieces
from lbi_engine.models.network import LiftedNetwork
from tests.engine.models.test_graph_networks import _randomise_bn

torchvision = pytest.importorskip("torchvision")


def test_permutation_of_finds_torchs_channel_shuffle() -> None:
    shuffle = nn.ChannelShuffle(3)
    picks = permutation_of((6, 2, 3), shuffle)
    x = torch.randn(2, 6, 2, 3, dtype=torch.float64)
    assert picks == [0, 2, 4, 1, 3, 5]
    assert torch.equal(selection_conv(6, picks).double()(x), shuffle(x))


@pytest.mark.parametrize("ops", [
    lambda x: x.transpose(2, 3),  # a spatial transpose (square maps): not a channel map
    lambda x: x.flip(0),  # samples swapped
    lambda x: x.roll(1, dims=3),  # pixels moved within a channel
    lambda x: 2 * x,  # not a selection
    lambda x: x[:, :2],  # another shape
])
def test_permutation_of_rejects_what_is_not_a_channel_permutation(ops) -> None:
    assert permutation_of((4, 3, 3), ops) is None


def test_selection_conv_equals_indexing_and_its_lifted_adjoint_is_the_transpose() -> None:
    picks = [3, 0, 0, 2]  # a selection may repeat and drop channels
    conv = selection_conv(5, picks).double()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 3, 4, generator=g, dtype=torch.float64)
    assert torch.equal(conv(x), x[:, picks])
    net = LiftedNetwork.from_module(nn.Sequential(conv, nn.ReLU()), (5, 3, 4))
    affine = net.layers[0].affine
    y = torch.randn(2, 4, 3, 4, generator=g, dtype=torch.float64)
    lhs = float((affine.apply(x) * y).sum())
    rhs = float((x * affine.adjoint(y)).sum())
    assert lhs == pytest.approx(rhs, rel=1e-13)
    scatter = torch.zeros_like(x).index_add_(1, torch.tensor(picks), y)  # S^T y by hand
    assert torch.allclose(affine.adjoint(y), scatter, rtol=0, atol=1e-14)


def test_sections_follow_torch_chunk_and_split() -> None:
    row = torch.zeros(1, 7)
    assert sections(7, None, 3) == [t.shape[1] for t in row.chunk(3, dim=1)]
    assert sections(7, 3, None) == [t.shape[1] for t in row.split(3, dim=1)]
    assert sections(7, [2, 5], None) == [2, 5]
    assert split_pieces(7, [2, 5], ["a", "b"]) == [("a", [0, 1]), ("b", [2, 3, 4, 5, 6])]
    assert split_pieces(7, [2, 4], ["a", "b"]) is None


class _Split(nn.Module):
    """Uneven torch.split of the channels, each piece through its own conv, concatenated in
    the other order and shuffled by permute (not transpose)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.a, self.b = nn.Conv2d(3, 4, 1), nn.Conv2d(5, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.stem(x))
        p, q = torch.split(h, [3, 5], dim=1)
        out = torch.cat([torch.relu(self.b(q)), torch.relu(self.a(p))], dim=1)
        n, c, hh, ww = out.shape
        return out.reshape(n, 2, c // 2, hh, ww).permute(0, 2, 1, 3, 4).reshape(n, c, hh, ww)


def _blocks() -> dict[str, nn.Module]:
    from torchvision.models.shufflenetv2 import InvertedResidual

    from benchmarks.heldout.nets import Dense, Inception, UNetSmall

    torch.manual_seed(0)
    stem = [nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()]
    return {"shuffle": nn.Sequential(*stem, InvertedResidual(8, 16, 2),
                                     InvertedResidual(16, 16, 1)),
            "dense": nn.Sequential(*stem, Dense(8, growth=4, layers=2)),
            "encoder-decoder": UNetSmall(),
            "inception": nn.Sequential(*stem, Inception(8)),
            "split": _Split()}


def _lift(module: nn.Module, shape: tuple[int, ...], fmt: str, tmp_path) -> LiftedNetwork:
    example = (torch.randn(1, *shape),)
    path = tmp_path / f"net.{fmt}"
    if fmt == "onnx":
        pytest.importorskip("onnx")
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(module, example, str(path))
        return LiftedNetwork.from_onnx(path)
    torch.export.save(torch.export.export(module, example), str(path))
    return LiftedNetwork.from_pt2(path)


def _check_forward(net: LiftedNetwork, module: nn.Module, shape: tuple[int, ...]) -> None:
    x = torch.randn(3, *shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    with torch.no_grad():
        want = module.double()(x)
        got = net.to(dtype=torch.float64)(x)
    assert got.shape == want.shape
    assert float((got - want).abs().max()) <= 1e-6 * float(want.abs().max())


@pytest.mark.parametrize("name", ["shuffle", "dense", "encoder-decoder", "inception", "split"])
@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_blocks_with_splits_shuffles_and_concatenations_lift_from_exports(tmp_path, name,
                                                                          fmt) -> None:
    module = _randomise_bn(_blocks()[name]).float()
    shape = (3, 8, 8)
    net = _lift(module, shape, fmt, tmp_path)
    _check_forward(net, module, shape)


@pytest.mark.parametrize("pool", [
    nn.MaxPool2d(3, 2, 1), nn.MaxPool2d(2, 2, ceil_mode=True),
    nn.MaxPool2d(3, 1, 1, ceil_mode=True), nn.MaxPool2d(3, 2, 1, ceil_mode=True),
    nn.MaxPool2d(2, 2, dilation=2),
    nn.MaxPool2d((3, 2), (2, 1), (1, 0), ceil_mode=True)])
@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_max_pool_in_every_mode_after_a_relu_lifts(tmp_path, pool, fmt) -> None:
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), pool,
                           nn.Conv2d(3, 2, 1)).eval()
    shape = (2, 9, 9)  # odd: ceil_mode adds a window
    _check_forward(_lift(module, shape, fmt, tmp_path), module, shape)


@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_a_non_proximal_activation_is_refused_by_name(tmp_path, fmt) -> None:
    from lbi_engine.errors import UnsupportedLayerError

    module = nn.Sequential(nn.Conv2d(3, 4, 3), nn.SiLU()).eval()
    with pytest.raises(UnsupportedLayerError, match="(?i)silu|sigmoid.*mul|swish"):
        _lift(module, (3, 8, 8), fmt, tmp_path)
