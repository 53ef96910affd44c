"""Small user-style modules the exporter tests (ONNX, .pt2) share: a hand-written forward
with a functional view, a residual block (lifted as a graph) and a product of computed
tensors (refused: not affine)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ViewNet(nn.Module):
    """Conv -> ReLU -> x.view(x.size(0), -1) -> Linear -> Sigmoid (not an nn.Sequential)."""

    def __init__(self, side: int) -> None:
        super().__init__()
        self.conv, self.lin = nn.Conv2d(1, 2, 3), nn.Linear(2 * (side - 2) ** 2, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.lin(F.relu(self.conv(x)).view(x.size(0), -1)))


class Residual(nn.Module):
    """x + relu(W x + b): a skip connection."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.relu(self.lin(x))


class Product(nn.Module):
    """x * relu(W x + b): a product of two computed tensors, which is not affine."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.relu(self.lin(x))
