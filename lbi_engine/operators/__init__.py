"""Affine maps x -> W x + b taken from torch layers: the W_l, b_l of the lifted formulation.

Every solver needs three things from a layer's affine part: ``apply`` (the forward pass),
``adjoint`` (W^T r, for gradients of the Bregman loss, MATH.md §5.2) and ``norm`` (||W||_2, for
step sizes such as tau = 1.99/||W||^2, §5.3). The classes here give all three for the layer
kinds a feed-forward network is made of, batched over a leading dimension B.

This room holds composition, the dense (Linear) map and the shape-only/elementwise maps; the
base class and norm numerics are in :mod:`lbi_engine.operators._base` (re-exported here), the
convolution and pooling maps in :mod:`lbi_engine.operators.conv`, and the translation of
``nn.Module`` objects into maps in :mod:`lbi_engine.models.affine_layers`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lbi_engine.errors import ShapeMismatchError
from lbi_engine.operators._base import (
    ITER_SAFETY,
    AffineMap,
    _shape,
    exact_norm_of_matrix,
    lanczos_norm,
    use_exact_norm,
)

__all__ = [
    "AffineMap", "ComposedMap", "IdentityMap", "LinearMap", "PadMap", "Reshape", "ReshapeMap",
    "ScaleShift", "ScaleShiftMap", "exact_norm_of_matrix",
    "lanczos_norm",
]

# --- simple maps -----------------------------------------------------------------------------
class IdentityMap(AffineMap):
    """W = I: nn.Identity, eval-mode Dropout, and the affine part of a second activation."""

    kind = "Identity"

    def __init__(self, shape: Sequence[int]) -> None:
        super().__init__(shape, shape, None)
        self._norm, self.norm_method = 1.0, "exact"

    def linear(self, x: Tensor) -> Tensor:
        return x

    def adjoint(self, r: Tensor) -> Tensor:
        return r

    def describe(self) -> str:
        return f"Identity {self.in_shape}"


class ReshapeMap(AffineMap):
    """Batch-preserving reshape (Flatten, Unflatten, view): a permutation-free relabelling."""

    kind = "Reshape"

    def __init__(self, in_shape: Sequence[int], out_shape: Sequence[int],
                 kind: str = "Reshape") -> None:
        super().__init__(in_shape, out_shape, None)
        if self.in_numel != self.out_numel:
            raise ShapeMismatchError(
                f"{kind}: cannot reshape {self.in_shape} ({self.in_numel} values) to "
                f"{self.out_shape} ({self.out_numel} values); the sizes must agree.")
        self.kind = kind
        self._norm, self.norm_method = (1.0 if self.in_numel else 0.0), "exact"

    def linear(self, x: Tensor) -> Tensor:
        return x.reshape(x.shape[0], *self.out_shape)

    def adjoint(self, r: Tensor) -> Tensor:
        return r.reshape(r.shape[0], *self.in_shape)

    def describe(self) -> str:
        return f"{self.kind} {self.in_shape}->{self.out_shape}"


class PadMap(AffineMap):
    """Zero padding (positive entries) or cropping (negative) of the trailing dims, F.pad order.

    The adjoint of padding is cropping and vice versa, so the adjoint is F.pad with negated
    amounts. Used for nn.ZeroPad2d and for the asymmetric pads of imported ONNX models.
    """

    kind = "ZeroPad"

    def __init__(self, in_shape: Sequence[int], pads: Sequence[int]) -> None:
        self.pads = tuple(int(p) for p in pads)
        shape = list(in_shape)
        for i in range(len(self.pads) // 2):
            shape[-1 - i] += self.pads[2 * i] + self.pads[2 * i + 1]
        if min(shape) <= 0:
            raise ShapeMismatchError(f"Padding {self.pads} of input shape {tuple(in_shape)} "
                                     f"leaves nothing; use smaller crops.")
        super().__init__(in_shape, shape, None)
        self._norm, self.norm_method = 1.0, "exact"

    def linear(self, x: Tensor) -> Tensor:
        return F.pad(x, self.pads)

    def adjoint(self, r: Tensor) -> Tensor:
        return F.pad(r, tuple(-p for p in self.pads))

    def describe(self) -> str:
        return f"ZeroPad {self.in_shape}->{self.out_shape}, pads={self.pads}"


class ScaleShiftMap(AffineMap):
    """Diagonal map x -> scale * x + shift with scale/shift broadcastable to the sample shape.

    Eval-mode BatchNorm is this map with per-channel ``scale = gamma / sqrt(var + eps)`` and
    ``shift = beta - mean * scale`` (``channel_wise=True``); scalar arithmetic found by torch.fx
    (``x * 2 + 1``) is the scalar case. W is symmetric, so the adjoint is the same product.
    """

    kind = "ScaleShift"

    def __init__(self, shape: Sequence[int], scale: Tensor, shift: Tensor | None,
                 kind: str = "ScaleShift", channel_wise: bool = False) -> None:
        super().__init__(shape, shape, shift)
        self.scale = scale
        self.kind = kind
        self.channel_wise = channel_wise

    def _tensors(self) -> dict[str, Tensor | None]:
        return {"scale": self.scale, "bias": self.bias}

    def linear(self, x: Tensor) -> Tensor:
        return x * self.scale

    def adjoint(self, r: Tensor) -> Tensor:
        return r * self.scale

    def channel_vectors(self) -> tuple[Tensor, Tensor] | None:
        """(scale, shift) as vectors over the first sample dim, if the map is per channel."""
        if not self.channel_wise:
            return None
        c = self.in_shape[0]
        shift = self.bias if self.bias is not None else torch.zeros_like(self.scale)
        return self.scale.reshape(-1).expand(c), shift.reshape(-1).expand(c)

    def _compute_norm(self) -> tuple[float, str]:
        s = self.scale.detach().abs()
        return (float(s.max()) if s.numel() else 0.0), "exact"

    def describe(self) -> str:
        return f"{self.kind} {self.in_shape}"


class LinearMap(AffineMap):
    """nn.Linear: W acts on the last dim, so in_shape may be (..., n) like nn.Linear allows."""

    kind = "Linear"

    def __init__(self, weight: Tensor, bias: Tensor | None,
                 in_shape: Sequence[int] | None = None) -> None:
        if weight.dim() != 2:
            raise ShapeMismatchError(f"Linear weight must be 2-D (out, in); got "
                                     f"{tuple(weight.shape)}.")
        in_shape = _shape(in_shape) if in_shape is not None else (weight.shape[1],)
        if not in_shape or in_shape[-1] != weight.shape[1]:
            raise ShapeMismatchError(
                f"Linear {weight.shape[1]}->{weight.shape[0]} receives samples of shape "
                f"{in_shape}; the last dim must be {weight.shape[1]} (add a Flatten before it).")
        super().__init__(in_shape, (*in_shape[:-1], weight.shape[0]), bias)
        self.weight = weight

    def _tensors(self) -> dict[str, Tensor | None]:
        return {"weight": self.weight, "bias": self.bias}

    def linear(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight)

    def adjoint(self, r: Tensor) -> Tensor:
        return torch.matmul(r, self.weight)

    def apply(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)  # same kernel as nn.Linear: bitwise equal

    def _compute_norm(self) -> tuple[float, str]:
        # I (x) W on (..., n) has the norm of W itself.
        m, n = self.weight.shape
        if use_exact_norm(n, m):
            return exact_norm_of_matrix(self.weight.detach()), "exact"
        flat = LinearMap(self.weight.detach(), None)
        return lanczos_norm(flat) * ITER_SAFETY, "lanczos"

    def describe(self) -> str:
        return f"Linear {self.weight.shape[1]}->{self.weight.shape[0]}"


class ComposedMap(AffineMap):
    """W = W_k ... W_1, b = apply(0): consecutive affine layers seen as one lifted layer."""

    kind = "Composed"

    def __init__(self, maps: Sequence[AffineMap]) -> None:
        if not maps:
            raise ValueError("ComposedMap needs at least one map.")
        for a, b in zip(maps[:-1], maps[1:], strict=True):
            if a.out_shape != b.in_shape:
                raise ShapeMismatchError(
                    f"Cannot chain {a.describe()} (output {a.out_shape}) into {b.describe()} "
                    f"(input {b.in_shape}).")
        super().__init__(maps[0].in_shape, maps[-1].out_shape, None)
        self.maps = list(maps)
        self.kind = "+".join(m.kind for m in self.maps)
        self._bias: Tensor | None = None

    @property
    def bias(self) -> Tensor | None:
        """apply(0) of the chain, computed on first use (shape out_shape)."""
        if self._bias is None and any(m.bias is not None for m in self.maps):
            dev = self.device or torch.device("cpu")
            zero = torch.zeros(1, *self.in_shape, dtype=self.dtype or torch.float64, device=dev)
            with torch.no_grad():
                self._bias = self.apply(zero)[0]
        return self._bias

    @bias.setter
    def bias(self, value: Tensor | None) -> None:
        self._bias = value

    @property
    def dtype(self) -> torch.dtype | None:
        return next((m.dtype for m in self.maps if m.dtype is not None), None)

    @property
    def device(self) -> torch.device | None:
        return next((m.device for m in self.maps if m.device is not None), None)

    def to(self, device: torch.device | str | None = None,
           dtype: torch.dtype | None = None) -> ComposedMap:
        new = copy.copy(self)
        new.maps = [m.to(device=device, dtype=dtype) for m in self.maps]
        new.bias = None if self._bias is None else self._bias.to(device=device, dtype=dtype)
        return new

    def linear(self, x: Tensor) -> Tensor:
        for m in self.maps:
            x = m.linear(x)
        return x

    def adjoint(self, r: Tensor) -> Tensor:
        for m in reversed(self.maps):
            r = m.adjoint(r)
        return r

    def apply(self, x: Tensor) -> Tensor:
        for m in self.maps:
            x = m.apply(x)
        return x

    def describe(self) -> str:
        return " ; ".join(m.describe() for m in self.maps)


# --- lbi's own small modules (targets of the fx, TorchScript and ONNX translations) ---------
class Reshape(nn.Module):
    """Batch-preserving reshape ``x.reshape(B, *shape)``: the module form of view/Reshape."""

    def __init__(self, shape: Sequence[int]) -> None:
        super().__init__()
        self.shape = _shape(shape)

    def forward(self, x: Tensor) -> Tensor:
        return x.reshape(x.shape[0], *self.shape)

    def extra_repr(self) -> str:
        return f"shape={self.shape}"


def _as_float_tensor(v: Tensor | float) -> Tensor:
    """Floating tensors keep their dtype (float64 stays exact); numbers get the default."""
    if isinstance(v, Tensor) and v.is_floating_point():
        return v.detach().clone()
    return torch.as_tensor(v, dtype=torch.get_default_dtype())


class ScaleShift(nn.Module):
    """Elementwise ``x * scale + shift`` (scalars or tensors broadcastable to a sample)."""

    scale: Tensor  # buffers (registered in __init__), declared for the type checker
    shift: Tensor

    def __init__(self, scale: Tensor | float = 1.0, shift: Tensor | float = 0.0) -> None:
        super().__init__()
        self.register_buffer("scale", _as_float_tensor(scale))
        self.register_buffer("shift", _as_float_tensor(shift))

    def forward(self, x: Tensor) -> Tensor:
        return x * self.scale + self.shift
