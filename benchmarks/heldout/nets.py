"""The architectures of the held-out evaluation, built in code (no weight downloads).

Each entry is a torchvision slice or a small network of a kind researchers use, cut where the
kind first appears, and the export format lbi reads it from. ``build(name, seed)`` gives the
module with random weights drawn from ``torch.manual_seed(seed)``; ``training.trained`` gives
the same module with weights trained on the calibration photographs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class Arch:
    name: str
    fmt: str  # "onnx" or "pt2": how the network reaches lbi
    make: Callable[[], nn.Module]
    kind: str  # what the slice exercises, for the report


def _tv(name: str) -> Callable[..., nn.Module]:
    import torchvision

    return getattr(torchvision.models, name)


def _resnet18_slice() -> nn.Module:
    r = _tv("resnet18")(weights=None)
    return nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool, r.layer1)


def _stem(out: int, stride: int = 1) -> list[nn.Module]:
    return [nn.Conv2d(3, out, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(out),
            nn.ReLU()]


class Inception(nn.Module):
    """GoogLeNet's block at small widths: 1x1, 1x1-3x3, 1x1-5x5 and max-pool-1x1 branches
    (torchvision's pool: 3x3, stride 1, padding 1, ceil_mode), concatenated along the
    channels."""

    def __init__(self, cin: int) -> None:
        super().__init__()

        def unit(a: int, b: int, k: int) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(a, b, k, padding=k // 2), nn.ReLU())

        self.b1 = unit(cin, 8, 1)
        self.b3 = nn.Sequential(unit(cin, 6, 1), unit(6, 8, 3))
        self.b5 = nn.Sequential(unit(cin, 4, 1), unit(4, 4, 5))
        self.pool = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True),
                                  unit(cin, 4, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.pool(x)], dim=1)


class Dense(nn.Module):
    """DenseNet's block: each BN-ReLU-conv layer sees the concatenation of all before it."""

    def __init__(self, cin: int, growth: int = 8, layers: int = 3) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            nn.Sequential(nn.BatchNorm2d(cin + i * growth), nn.ReLU(),
                          nn.Conv2d(cin + i * growth, growth, 3, padding=1, bias=False))
            for i in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.cat([x, layer(x)], dim=1)
        return x


class UNetSmall(nn.Module):
    """An encoder-decoder: two strided convolutions down, transposed convolutions up, the
    encoder's features concatenated to the decoder's at each scale."""

    def __init__(self) -> None:
        super().__init__()
        self.e1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.e2 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU())
        self.up = nn.Sequential(nn.ConvTranspose2d(16, 8, 2, stride=2), nn.ReLU())
        self.out = nn.Sequential(nn.Conv2d(16, 8, 3, padding=1), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = self.e1(x)
        return self.out(torch.cat([self.up(self.e2(skip)), skip], dim=1))


def _inception() -> nn.Module:
    return nn.Sequential(*_stem(16), Inception(16))


def _dense() -> nn.Module:
    return nn.Sequential(*_stem(16, stride=2), Dense(16))


def _bottleneck() -> nn.Module:
    from torchvision.models.resnet import Bottleneck

    return nn.Sequential(*_stem(32, stride=2), Bottleneck(32, 8))


def _grouped_residual() -> nn.Module:
    from torchvision.models.resnet import Bottleneck

    # ResNeXt's unit: width 8 * 4 groups = 32 channels through the grouped 3x3
    return nn.Sequential(*_stem(32, stride=2), Bottleneck(32, 8, groups=4, base_width=64))


def _shuffle() -> nn.Module:
    from torchvision.models.shufflenetv2 import InvertedResidual

    # the stride-2 unit (two branches concatenated, then channel_shuffle: view-transpose-view),
    # then a stride-1 unit (chunk into halves, one branch, concatenation, shuffle)
    return nn.Sequential(*_stem(24, stride=2), InvertedResidual(24, 48, 2),
                         InvertedResidual(48, 48, 1))


def _inverted_residual() -> nn.Module:
    from torchvision.models.mobilenetv2 import InvertedResidual

    return nn.Sequential(*_stem(16, stride=2), InvertedResidual(16, 16, 1, expand_ratio=4))


def _bn_maxpool() -> nn.Module:
    # two pooling modes: padded 3x3 stride 2 (resnet's), then 2x2 with ceil_mode on 16 -> 8
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16),
                         nn.ReLU(), nn.MaxPool2d(3, stride=2, padding=1),
                         nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32),
                         nn.ReLU(), nn.MaxPool2d(2, stride=2, ceil_mode=True))


def _bn_relu6_avgpool() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU6(),
                         nn.AvgPool2d(2), nn.Conv2d(16, 32, 3, padding=1),
                         nn.BatchNorm2d(32), nn.ReLU6(), nn.AvgPool2d(2))


def _tiny() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU())


ARCHS: dict[str, Arch] = {a.name: a for a in (
    Arch("resnet18-onnx", "onnx", _resnet18_slice, "stem, max-pool, residual blocks"),
    Arch("resnet18-pt2", "pt2", _resnet18_slice, "stem, max-pool, residual blocks"),
    Arch("vgg11", "onnx", lambda: _tv("vgg11")(weights=None).features[:6], "conv-pool chain"),
    Arch("alexnet", "pt2", lambda: _tv("alexnet")(weights=None).features[:5],
         "strided 11x11, overlapping max-pool"),
    Arch("mobilenet_v2", "onnx", lambda: _tv("mobilenet_v2")(weights=None).features[:3],
         "depthwise, ReLU6"),
    Arch("squeezenet1_1", "onnx", lambda: _tv("squeezenet1_1")(weights=None).features[:4],
         "Fire module (concatenation)"),
    Arch("bn-relu6-avgpool", "pt2", _bn_relu6_avgpool, "BN, ReLU6, average pool"),
    Arch("inception", "pt2", _inception, "parallel branches, max-pool branch, concatenation"),
    Arch("dense", "pt2", _dense, "dense concatenation"),
    Arch("bottleneck", "onnx", _bottleneck, "1x1-3x3-1x1 residual"),
    Arch("channel-shuffle", "pt2", _shuffle, "two branches, concatenation, channel shuffle"),
    Arch("grouped-residual", "onnx", _grouped_residual, "grouped 3x3 residual (ResNeXt)"),
    Arch("inverted-residual", "pt2", _inverted_residual, "expand-depthwise-project residual"),
    Arch("bn-maxpool", "onnx", _bn_maxpool, "BN, max-pool padded and ceil_mode"),
    Arch("encoder-decoder", "pt2", UNetSmall, "transposed convolution, skip concatenation"),
)}

#: the smallest network, for ``--quick`` and the smoke test
TINY = Arch("tiny", "onnx", _tiny, "one convolution")


def arch(name: str) -> Arch:
    return TINY if name == TINY.name else ARCHS[name]


def build(name: str, seed: int) -> nn.Module:
    """The architecture with random weights drawn from ``seed``, in eval mode."""
    torch.manual_seed(seed)  # the framework's own initialisation, BN as (0, 1) statistics
    return arch(name).make().eval()
