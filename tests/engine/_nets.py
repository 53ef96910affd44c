"""The small seeded networks the engine tests share, built in one place.

Several test files invert, import or evaluate the same architectures (ReLU MLPs such as
36 -> 72 -> 108, the paper's CNN encoder of MATH.md §9.3); building them here keeps the
weights of every copy identical by construction. Also here: a tiny stand-in for
LiftedNetwork (``StandInNet``), written out with the closed forms of MATH.md §2.3, so the
metric and noise tests do not depend on ``lbi_engine.models.network`` or ``lbi_engine.activations``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from lbi_engine.activations import make_activation
from lbi_engine.models.layer_lifting import affine_from_modules
from lbi_engine.models.network import LiftedLayer, LiftedNetwork


# -- torch modules, seeded ----------------------------------------------------------------------
def gaussian_init(module: nn.Module, seed: int, gain: float = 1.0, bias: float = 0.1) -> nn.Module:
    """Re-draw every Linear/Conv weight as N(0, gain^2/fan_in) and bias as N(0, bias^2),
    from a private generator (independent of torch's global seed), in float64."""
    g = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            fan_in = m.weight[0].numel()
            with torch.no_grad():
                m.weight.copy_(gain * torch.randn(m.weight.shape, generator=g) / math.sqrt(fan_in))
                if m.bias is not None:
                    m.bias.copy_(bias * torch.randn(m.bias.shape, generator=g))
    return module.double()


def relu_mlp_module(widths: Sequence[int]) -> nn.Sequential:
    """Linear(w_0, w_1), ReLU, Linear(w_1, w_2), ReLU, ...: the dense ReLU nets of the solver
    tests (torch's default init; ``gaussian_init`` re-draws it)."""
    mods: list[nn.Module] = []
    for n_in, n_out in zip(widths[:-1], widths[1:], strict=True):
        mods += [nn.Linear(n_in, n_out), nn.ReLU()]
    return nn.Sequential(*mods)


def paper_cnn_encoder() -> nn.Sequential:
    """MATH.md §9.3: Conv(1,8,4,2,1), ReLU, Conv(8,16,4,2,1), ReLU, Flatten, Linear(784,300)."""
    return nn.Sequential(nn.Conv2d(1, 8, 4, 2, 1), nn.ReLU(), nn.Conv2d(8, 16, 4, 2, 1),
                         nn.ReLU(), nn.Flatten(), nn.Linear(784, 300))


def paper_cnn_decoder() -> nn.Sequential:
    """MATH.md §9.3: the mirror of ``paper_cnn_encoder`` (300 -> (1, 28, 28))."""
    return nn.Sequential(nn.Linear(300, 784), nn.Unflatten(1, (16, 7, 7)),
                         nn.ConvTranspose2d(16, 8, 4, 2, 1), nn.ReLU(),
                         nn.ConvTranspose2d(8, 1, 4, 2, 1), nn.ReLU())


def seeded_cnn_encoder(seed: int = 0) -> nn.Sequential:
    """The paper's encoder with PyTorch's default init from a fixed seed and zero biases (a
    dark background then maps to an exactly dark code)."""
    torch.manual_seed(seed)
    enc = paper_cnn_encoder()
    for m in enc:
        if getattr(m, "bias", None) is not None:
            nn.init.zeros_(m.bias)
    return enc


# -- lifted networks -----------------------------------------------------------------------------
def lift(module: nn.Module, input_shape: tuple[int, ...],
         dtype: torch.dtype = torch.float64) -> LiftedNetwork:
    """``LiftedNetwork.from_module`` in ``dtype`` (float64 unless a test checks float32)."""
    return LiftedNetwork.from_module(module.to(dtype), input_shape)


def relu_mlp(widths: Sequence[int], seed: int = 0, gain: float = 1.0,
             dtype: torch.dtype = torch.float64) -> LiftedNetwork:
    """``relu_mlp_module(widths)`` with ``gaussian_init(seed, gain)``, lifted on (w_0,)."""
    module = gaussian_init(relu_mlp_module(widths), seed, gain)
    return lift(module, (widths[0],), dtype)


def relu_perceptron(side: int, m: int, seed: int, gain: float = 1.0) -> LiftedNetwork:
    """Linear(side^2, m) + ReLU with Gaussian weights (flat input, square image)."""
    return relu_mlp((side * side, m), seed, gain)


def chain(specs: list[tuple[nn.Module, str | dict]], input_shape: tuple[int, ...], seed: int = 0,
          gain: float = 1.0) -> LiftedNetwork:
    """A lifted network from (affine module, activation name) pairs, built layer by layer so
    that activations nn.Sequential cannot express between two affine maps (identity) are
    possible: from_module would merge Linear, Linear into one layer."""
    layers, shape = [], tuple(input_shape)
    for i, (module, act) in enumerate(specs):
        gaussian_init(module, seed + i, gain=gain)
        mods = [nn.Flatten(), module] if isinstance(module, nn.Linear) and len(shape) > 1 \
            else [module]
        affine = affine_from_modules(mods, shape)
        layers.append(LiftedLayer(affine, make_activation(act), f"{i}:{type(module).__name__}"))
        shape = affine.out_shape
    return LiftedNetwork(layers, input_shape)


# -- a stand-in for LiftedNetwork (metrics and noise tests) --------------------------------------
class StandInRelu:
    """ReLU: psi = indicator of [0, inf); B(x, z) = ½x² + ½z_+² - xz, +inf unless x >= 0."""

    name, lower, upper = "relu", 0.0, math.inf

    def sigma(self, z: Tensor) -> Tensor:
        return z.clamp_min(0)

    def project(self, x: Tensor) -> Tensor:
        return x.clamp_min(0)

    def in_domain(self, x: Tensor, atol: float = 0.0) -> Tensor:
        return (x >= -atol).flatten(1).all(1)

    def bregman(self, x: Tensor, z: Tensor) -> Tensor:
        v = (0.5 * x**2 + 0.5 * z.clamp_min(0) ** 2 - x * z).flatten(1).sum(1)
        return torch.where(self.in_domain(x), v, torch.full_like(v, math.inf))


class StandInIdentity:
    """Identity: psi = 0, B(x, z) = ½||x - z||²."""

    name, lower, upper = "identity", -math.inf, math.inf

    def sigma(self, z: Tensor) -> Tensor:
        return z

    def project(self, x: Tensor) -> Tensor:
        return x

    def in_domain(self, x: Tensor, atol: float = 0.0) -> Tensor:
        return torch.ones(x.shape[0], dtype=torch.bool)

    def bregman(self, x: Tensor, z: Tensor) -> Tensor:
        return (0.5 * (x - z) ** 2).flatten(1).sum(1)


class StandInAffine:
    """x -> W x + b on flattened samples."""

    def __init__(self, w: Tensor, b: Tensor, in_shape: tuple[int, ...]) -> None:
        self.w, self.b, self.in_shape = w, b, in_shape

    def apply(self, x: Tensor) -> Tensor:
        return x.flatten(1) @ self.w.T + self.b


class StandInLayer:
    """One layer: ``affine`` (with ``w``, ``b`` also on the layer) and ``activation``."""

    def __init__(self, w: Tensor, b: Tensor, activation: object,
                 in_shape: tuple[int, ...] | None = None) -> None:
        self.w, self.b, self.activation = w, b, activation
        self.affine = StandInAffine(w, b, in_shape or (w.shape[1],))


class StandInNet:
    """The parts of LiftedNetwork that metrics and noise use: layers, pre_activation,
    forward_states and forward."""

    def __init__(self, layers: list[StandInLayer]) -> None:
        self.layers = layers

    def pre_activation(self, index: int, x_prev: Tensor) -> Tensor:
        return self.layers[index].affine.apply(x_prev)

    def forward_states(self, x: Tensor) -> list[Tensor]:
        states = []
        for index, layer in enumerate(self.layers):
            x = layer.activation.sigma(self.pre_activation(index, x))
            states.append(x)
        return states

    def forward(self, x: Tensor) -> Tensor:
        return self.forward_states(x)[-1]
