"""The inversion problem of the paper (eq. 2, lifted to all layers, MATH.md §5.1).

    minimise over x_0, ..., x_{L-1}:  sum_l B_{Psi_l}(x_l, W_l x_{l-1} + b_l) + alpha R(x_0),
    with x_L := y_delta.

For a method that only estimates x_0 (Landweber, backpropagation, PDHG on one layer) the
auxiliary variables are the forward states of x_0, so every Bregman term but the last is 0
and the objective reduces to B_{Psi_L}(y_delta, f(x_0)) + alpha R(x_0): objectives of all
methods are directly comparable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from lbi_engine.errors import InputError, ShapeMismatchError
from lbi_engine.protocols import Network, Regulariser

if TYPE_CHECKING:
    from lbi_engine.priors.feature import FeaturePriors


@dataclass
class InversionProblem:
    """Everything a solver needs; no solver state.

    Attributes:
        network: the lifted encoder to invert (its output is the measured code).
        y_delta: measured (noisy) output, ``(B, *network.output_shape)``, inside dom Psi_L.
        regulariser: the prior R on the input (see ``lbi_engine.regularisers``).
        alpha: regularisation weight (> 0; 0 is accepted only for the unregularised baselines).
        x_true: ground truth in network input space, for PSNR/SSIM (optional).
        data_range: the range of the display images for PSNR/SSIM (1 for [0,1] images).
        display_offset: scalar added to a network-space image to bring it to display space
            (preprocessing centring); PSNR is invariant to it, SSIM is not.
        delta: the noise level ||y_delta - y|| per sample when known (discrepancy principle).
        layer_alphas: per-layer weights for the layer-wise method (len L-1), else alpha.
        image_shape: how to view a flat input as an image for the regulariser and SSIM;
            inferred for image-shaped inputs and for flat inputs of square length.
        extras: settings a solver stage passes on with the problem, keyed by name (e.g. the
            hidden-layer weight the alpha search raised, ``lbi_engine.models.rescale``).
        feature_priors: learned priors on the auxiliary variables x_1 .. x_{L-1}
            (``lbi_engine.priors.feature.FeaturePriors``); the layer-wise method needs them.
    """

    network: Network  # a LiftedNetwork (typed by its protocol: no eager import of models)
    y_delta: Tensor
    regulariser: Regulariser
    alpha: float
    x_true: Tensor | None = None
    data_range: float = 1.0
    display_offset: float = 0.0
    delta: Tensor | None = None
    layer_alphas: list[float] | None = None
    image_shape: tuple[int, ...] | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    feature_priors: FeaturePriors | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.y_delta, Tensor):
            raise InputError("y_delta: expected a torch tensor of shape (B, *output_shape).")
        expected = tuple(self.network.output_shape)
        if tuple(self.y_delta.shape[1:]) != expected:
            shape = ", ".join(map(str, expected))
            raise ShapeMismatchError(
                f"y_delta has shape {tuple(self.y_delta.shape)} but the network "
                f"'{getattr(self.network, 'name', '')}' outputs (B, {shape});"
                " give one code per sample with the network's output shape."
            )
        if not torch.isfinite(self.y_delta).all():
            raise InputError("y_delta contains NaN or Inf values; remove or replace them.")
        alpha = float(self.alpha)
        if not math.isfinite(alpha) or alpha < 0 or alpha > 1e6:
            raise InputError(
                f"alpha={self.alpha}: the regularisation weight must be a finite number in (0, 1e6]"
                " (typical values 1e-4 .. 1e-1)."
            )
        self.alpha = alpha
        if self.x_true is not None:
            expected_in = tuple(self.network.input_shape)
            if tuple(self.x_true.shape[1:]) != expected_in or self.x_true.shape[0] != self.batch:
                raise ShapeMismatchError(
                    f"x_true has shape {tuple(self.x_true.shape)}; expected "
                    f"({self.batch}, {', '.join(map(str, expected_in))})."
                )
        self.image_shape = _infer_image_shape(self.input_shape, self.image_shape)
        self.reg = ShapedRegulariser(self.regulariser, self.input_shape, self.image_shape)
        if self.layer_alphas is not None:
            if len(self.layer_alphas) != self.depth - 1:
                raise InputError(
                    f"layer_alphas has {len(self.layer_alphas)} entries; the network has "
                    f"{self.depth} layers, so give {self.depth - 1} (one per auxiliary variable)."
                )
            if any(not (a >= 0 and math.isfinite(a)) for a in self.layer_alphas):
                raise InputError("layer_alphas: every entry must be a finite number >= 0.")

    # -- shapes ----------------------------------------------------------------------------
    @property
    def batch(self) -> int:
        """The number of samples B (the leading dimension of ``y_delta``)."""
        return int(self.y_delta.shape[0])

    @property
    def depth(self) -> int:
        """The number of lifted layers L."""
        return len(self.network.layers)

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The network's input shape without the batch dimension."""
        return tuple(self.network.input_shape)

    @property
    def device(self) -> torch.device:
        """Where the data lives; every solver works there."""
        return self.y_delta.device

    @property
    def dtype(self) -> torch.dtype:
        """The data's dtype; every solver computes in it."""
        return self.y_delta.dtype

    def zeros_input(self) -> Tensor:
        """Zeros of shape ``(B, *input_shape)`` on the problem's device and dtype."""
        return torch.zeros((self.batch, *self.input_shape), device=self.device, dtype=self.dtype)

    def layer_alpha(self, index: int) -> float:
        """Weight of Psi for auxiliary variable x_index (1-based, layer-wise method)."""
        if self.layer_alphas is None:
            return self.alpha
        return float(self.layer_alphas[index - 1])

    # -- objective ---------------------------------------------------------------------------
    def forward_aux(self, x0: Tensor) -> list[Tensor]:
        """Auxiliary variables x_1 .. x_{L-1} as the forward states of x0."""
        states = self.network.forward_states(x0)
        return list(states[:-1])

    def objective_parts(self, x0: Tensor, aux: list[Tensor] | None = None) -> dict[str, Tensor]:
        """Per-sample parts of the objective: ``bregman`` (B, L), ``reg`` (B,) = alpha R(x0),
        ``total`` (B,), and ``discrepancy`` (B,) = ||sigma_L(f(x0)) - y_delta||."""
        if aux is None:
            aux = self.forward_aux(x0)
        layers = self.network.layers
        terms = []
        prev = x0
        if not getattr(self.network, "is_chain", True):  # a graph (MATH.md §5.6)
            states = [x0, *aux, self.y_delta]
            for index, layer in enumerate(layers):
                z = self.network.pre_activation_of(index, states)
                terms.append(layer.activation.bregman(states[index + 1], z))
            layers = []  # the chain loop below has nothing left to do
        for index, layer in enumerate(layers):
            target = aux[index] if index < len(layers) - 1 else self.y_delta
            z = layer.affine.apply(prev)
            terms.append(layer.activation.bregman(target, z))
            prev = target
        bregman = torch.stack(terms, dim=1)
        reg = self.alpha * self.reg.value(x0)
        output = self.network.forward(x0)
        discrepancy = (output - self.y_delta).reshape(self.batch, -1).norm(dim=1)
        return {
            "bregman": bregman,
            "reg": reg,
            "total": bregman.sum(dim=1) + reg,
            "discrepancy": discrepancy,
        }


def _infer_image_shape(
    input_shape: tuple[int, ...], image_shape: tuple[int, ...] | None
) -> tuple[int, ...] | None:
    if image_shape is not None:
        if math.prod(image_shape) != math.prod(input_shape):
            raise ShapeMismatchError(
                f"image_shape {tuple(image_shape)} has {math.prod(image_shape)} pixels but the "
                f"network input {input_shape} has {math.prod(input_shape)}; give a matching shape."
            )
        return tuple(image_shape)
    if len(input_shape) >= 2:
        return tuple(input_shape)
    side = math.isqrt(input_shape[0])
    if side * side == input_shape[0]:
        return (1, side, side)
    return None


class ShapedRegulariser:
    """Presents a regulariser on the network's input shape while it works on images.

    Networks often take flat vectors (a perceptron on 64*64 pixels); total variation needs
    the image. Reshapes are views, so this costs nothing per iteration.
    """

    def __init__(
        self, reg: Regulariser, input_shape: tuple[int, ...], image_shape: tuple[int, ...] | None
    ) -> None:
        self.inner = reg
        self.input_shape = tuple(input_shape)
        self.image_shape = tuple(image_shape) if image_shape is not None else self.input_shape
        self.has_dual = bool(getattr(reg, "has_dual", False))
        self.name = getattr(reg, "name", "")
        if self.has_dual and image_shape is None and len(self.input_shape) < 2:
            raise ShapeMismatchError(
                f"the regulariser '{self.name}' needs an image, but the network input "
                f"{self.input_shape} is a flat vector of non-square length; pass image_shape "
                "(e.g. --input-shape C,H,W) or choose l1, tikhonov, nonneg or none."
            )

    def _img(self, x: Tensor) -> Tensor:
        return x.reshape(x.shape[0], *self.image_shape)

    def _back(self, x: Tensor) -> Tensor:
        return x.reshape(x.shape[0], *self.input_shape)

    def value(self, x: Tensor) -> Tensor:
        return self.inner.value(self._img(x))

    def K(self, x: Tensor) -> Tensor:  # the operator's conventional name
        return self.inner.K(self._img(x))

    def KT(self, p: Tensor) -> Tensor:
        return self._back(self.inner.KT(p))

    def K_norm_sq(self) -> float:
        return float(self.inner.K_norm_sq(self.image_shape))

    def prox_dual(self, p: Tensor, step: float, alpha: float) -> Tensor:
        return self.inner.prox_dual(p, step, alpha)

    def prox_primal(self, x: Tensor, step: float, alpha: float) -> Tensor:
        return self._back(self.inner.prox_primal(self._img(x), step, alpha))

    def subgradient(self, x: Tensor) -> Tensor:
        return self._back(self.inner.subgradient(self._img(x)))
