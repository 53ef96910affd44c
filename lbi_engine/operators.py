"""Affine maps x -> W x + b taken from torch layers: the W_l, b_l of the lifted formulation.

Every solver needs three things from a layer's affine part: ``apply`` (the forward pass),
``adjoint`` (W^T r, for gradients of the Bregman loss, MATH.md §5.2) and ``norm`` (||W||_2, for
step sizes such as tau = 1.99/||W||^2, §5.3). The classes here give all three for the layer
kinds a feed-forward network is made of, batched over a leading dimension B.

This room holds the base class, composition and the shape-only/elementwise maps; the
convolution and pooling maps live in :mod:`lbi_engine.conv_operators`, and the translation of
``nn.Module`` objects into maps in :mod:`lbi_engine.layer_lifting`.
"""

from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lbi_engine.errors import ShapeMismatchError

# norm(): an exact value (eigenvalues of the Gram matrix of the smaller side, float64) is
# affordable up to these sizes (0.1-1 s for a 1024-sided Gram matrix on 2 busy cores); above
# them power iteration is used and its result is multiplied by POWER_SAFETY so that it is an
# upper bound (power iteration converges from below), which is what step-size rules need.
EXACT_MAX_SIDE = 1024
EXACT_MAX_ENTRIES = 2**22
POWER_SAFETY = 1.01
POWER_RTOL = 1e-6
POWER_MAX_ITER = 5000
POWER_SEED = 0


def _shape(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(s) for s in shape)


def _numel(shape: Sequence[int]) -> int:
    return int(math.prod(shape))


class AffineMap(ABC):
    """x -> W x + b on samples of shape ``in_shape`` (leading batch dim B on all tensors).

    Subclasses implement :meth:`linear` and :meth:`adjoint`; ``bias`` is None for b = 0.
    ``norm()`` is cached: the weights of a map never change after construction (``to``
    returns a new map).
    """

    kind: str = "Affine"

    def __init__(self, in_shape: Sequence[int], out_shape: Sequence[int],
                 bias: Tensor | None = None) -> None:
        self.in_shape = _shape(in_shape)
        self.out_shape = _shape(out_shape)
        self.bias = bias
        self._norm: float | None = None
        self.norm_method: str | None = None  # "exact" or "power" once norm() has run

    # --- the operator ---------------------------------------------------------------------
    @abstractmethod
    def linear(self, x: Tensor) -> Tensor:
        """W x: (B, *in_shape) -> (B, *out_shape)."""

    @abstractmethod
    def adjoint(self, r: Tensor) -> Tensor:
        """W^T r: (B, *out_shape) -> (B, *in_shape). The bias plays no part."""

    def apply(self, x: Tensor) -> Tensor:
        """W x + b, the layer's forward pass."""
        y = self.linear(x)
        return y if self.bias is None else y + self.bias

    # --- bookkeeping ----------------------------------------------------------------------
    def _tensors(self) -> dict[str, Tensor | None]:
        """Named tensor attributes that ``to`` must move; subclasses add their weights."""
        return {"bias": self.bias}

    @property
    def in_numel(self) -> int:
        return _numel(self.in_shape)

    @property
    def out_numel(self) -> int:
        return _numel(self.out_shape)

    @property
    def dtype(self) -> torch.dtype | None:
        """dtype of the map's own tensors; None for maps without tensors (reshape, pad)."""
        for t in self._tensors().values():
            if t is not None:
                return t.dtype
        return None

    @property
    def device(self) -> torch.device | None:
        for t in self._tensors().values():
            if t is not None:
                return t.device
        return None

    def to(self, device: torch.device | str | None = None,
           dtype: torch.dtype | None = None) -> AffineMap:
        """A new map with every tensor moved/cast; the cached norm is kept (same operator)."""
        new = copy.copy(self)
        for name, t in self._tensors().items():
            if t is not None:
                setattr(new, name, t.to(device=device, dtype=dtype))
        return new

    def describe(self) -> str:
        """One line for people, e.g. ``"Conv2d 1->8, k=4, s=2, p=1"``."""
        return f"{self.kind} {self.in_shape}->{self.out_shape}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"

    def _check_in(self, x: Tensor, what: str = "input") -> None:
        if tuple(x.shape[1:]) != self.in_shape:
            raise ShapeMismatchError(
                f"{self.describe()}: {what} has shape {tuple(x.shape)}, expected "
                f"(B, {', '.join(map(str, self.in_shape))}). Pass a batch of samples of "
                f"shape {self.in_shape}.")

    # --- explicit matrix and operator norm -------------------------------------------------
    def _work(self) -> tuple[AffineMap, torch.device]:
        device = self.device or torch.device("cpu")
        return self.to(dtype=torch.float64), device

    def dense(self, dtype: torch.dtype | None = None, chunk: int = 1024) -> Tensor:
        """The explicit matrix W (out_numel x in_numel), built column- or row-wise.

        Meant for tests and small maps; memory is out_numel * in_numel entries.
        """
        work = self if dtype is None else self.to(dtype=dtype)
        dt = dtype or self.dtype or torch.float64
        dev = self.device or torch.device("cpu")
        n, m = self.in_numel, self.out_numel
        if n <= m:  # columns W e_j
            cols = []
            for s in range(0, n, chunk):
                k = min(chunk, n - s)
                eye = torch.zeros(k, n, dtype=dt, device=dev)
                eye[torch.arange(k), torch.arange(s, s + k)] = 1
                cols.append(work.linear(eye.reshape(k, *self.in_shape)).reshape(k, m))
            return torch.cat(cols).T.contiguous()
        rows = []  # rows W^T e_i
        for s in range(0, m, chunk):
            k = min(chunk, m - s)
            eye = torch.zeros(k, m, dtype=dt, device=dev)
            eye[torch.arange(k), torch.arange(s, s + k)] = 1
            rows.append(work.adjoint(eye.reshape(k, *self.out_shape)).reshape(k, n))
        return torch.cat(rows)

    def norm(self) -> float:
        """||W||_2 as a python float, computed once.

        Exact (float64 eigenvalues of the smaller Gram matrix) when min(in, out) <=
        EXACT_MAX_SIDE and in*out <= EXACT_MAX_ENTRIES; otherwise power iteration on W^T W
        (seed POWER_SEED, relative tolerance POWER_RTOL) times POWER_SAFETY = 1.01, an upper
        bound. ``norm_method`` says which.
        """
        if self._norm is None:
            self._norm, self.norm_method = self._compute_norm()
        return self._norm

    def _compute_norm(self) -> tuple[float, str]:
        n, m = self.in_numel, self.out_numel
        if min(n, m) <= EXACT_MAX_SIDE and n * m <= EXACT_MAX_ENTRIES:
            return exact_norm_of_matrix(self.dense(dtype=torch.float64)), "exact"
        return power_norm(self) * POWER_SAFETY, "power"


def exact_norm_of_matrix(w: Tensor) -> float:
    """Largest singular value via eigvalsh of the smaller Gram matrix (float64, ~1e-15 rel)."""
    w = w.to(torch.float64)
    if w.numel() == 0:
        return 0.0
    g = w.T @ w if w.shape[1] <= w.shape[0] else w @ w.T
    return float(torch.linalg.eigvalsh(g)[-1].clamp_min(0).sqrt())


def power_norm(op: AffineMap, rtol: float = POWER_RTOL, max_iter: int = POWER_MAX_ITER) -> float:
    """Power iteration on W^T W in float64 from a seeded start; returns sqrt(Rayleigh quotient)."""
    work, device = op._work()
    gen = torch.Generator().manual_seed(POWER_SEED)
    v = torch.randn(1, *op.in_shape, generator=gen, dtype=torch.float64).to(device)
    v = v / v.norm()
    lam_old = 0.0
    for _ in range(max_iter):
        u = work.linear(v)
        lam = float(u.pow(2).sum())  # v^T W^T W v with ||v|| = 1: a lower bound of ||W||^2
        if lam == 0.0:
            return 0.0
        if abs(lam - lam_old) <= rtol * lam:
            break
        lam_old = lam
        w = work.adjoint(u)
        v = w / w.norm()
    return math.sqrt(lam)


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
            raise ShapeMismatchError(f"Linear weight must be 2-D (out, in); got {tuple(weight.shape)}.")
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
        if min(n, m) <= EXACT_MAX_SIDE and n * m <= EXACT_MAX_ENTRIES:
            return exact_norm_of_matrix(self.weight.detach()), "exact"
        flat = LinearMap(self.weight.detach(), None)
        return power_norm(flat) * POWER_SAFETY, "power"

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
    def bias(self) -> Tensor | None:  # type: ignore[override]
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
        new._bias = None if self._bias is None else self._bias.to(device=device, dtype=dtype)
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


def compose(maps: Sequence[AffineMap], fold: bool = True) -> AffineMap:
    """One map for a run of affine layers, simplified.

    Nested compositions are flattened, identities dropped, consecutive reshapes merged and,
    with ``fold``, a per-channel ScaleShift (eval BatchNorm) right after a Linear/Conv2d/
    ConvTranspose2d is folded into that layer's weights (one kernel call fewer per apply).
    """
    from lbi_engine.conv_operators import fold_channel_affine

    if not maps:
        raise ValueError("compose() needs at least one map.")
    flat: list[AffineMap] = []
    for m in maps:
        flat.extend(m.maps if isinstance(m, ComposedMap) else [m])
    out: list[AffineMap] = []
    for m in flat:
        if isinstance(m, IdentityMap):
            continue
        prev = out[-1] if out else None
        if isinstance(m, ReshapeMap) and isinstance(prev, ReshapeMap):
            out[-1] = ReshapeMap(prev.in_shape, m.out_shape, kind=prev.kind)
            continue
        if fold and prev is not None and isinstance(m, ScaleShiftMap):
            folded = fold_channel_affine(prev, m)
            if folded is not None:
                out[-1] = folded
                continue
        out.append(m)
    out = [m for m in out if not (isinstance(m, ReshapeMap) and m.in_shape == m.out_shape)]
    if not out:
        return IdentityMap(flat[0].in_shape)
    return out[0] if len(out) == 1 else ComposedMap(out)


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


class ScaleShift(nn.Module):
    """Elementwise ``x * scale + shift`` (scalars or tensors broadcastable to a sample)."""

    def __init__(self, scale: Tensor | float = 1.0, shift: Tensor | float = 0.0) -> None:
        super().__init__()
        self.register_buffer("scale", torch.as_tensor(scale, dtype=torch.get_default_dtype()))
        self.register_buffer("shift", torch.as_tensor(shift, dtype=torch.get_default_dtype()))

    def forward(self, x: Tensor) -> Tensor:
        return x * self.scale + self.shift


def affine_from_modules(modules: Sequence[nn.Module], in_shape: Sequence[int]) -> AffineMap:
    """Compose consecutive affine layers (Linear, Conv2d, BatchNorm (eval), ...) into one map.

    Raises UnsupportedLayerError for a module that is not affine (with the reason and the
    nearest supported alternative).
    """
    from lbi_engine.layer_lifting import affine_map_of_module

    shape = _shape(in_shape)
    maps: list[AffineMap] = []
    for i, m in enumerate(modules):
        amap = affine_map_of_module(m, shape, name=str(i), position=i, require=True)
        maps.append(amap)
        shape = amap.out_shape
    return compose(maps) if maps else IdentityMap(shape)
