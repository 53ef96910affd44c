"""The AffineMap base class and the operator-norm numerics shared by every affine map.

Kept apart from :mod:`lbi_engine.operators` (which re-exports everything here) so that the
concrete maps there and in :mod:`lbi_engine.operators.conv` can share one base.
"""

from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch
from torch import Tensor

from lbi_engine.errors import ShapeMismatchError

# norm(): an exact value (eigenvalues of the Gram matrix of the smaller side, float64) is
# affordable up to these sizes (about a second at most; docs/developer/calibration.md). Above
# them an iterative estimate is used (Lanczos on W^T W, i.e. accelerated power iteration; it
# converges from below) and multiplied by ITER_SAFETY = 1.01 so that it is an upper bound,
# which is what step-size rules such as tau < 2/||W||^2 need.
EXACT_MAX_SIDE = 1024
EXACT_MAX_ENTRIES = 2**22
ITER_SAFETY = 1.01
ITER_RTOL = 1e-6
ITER_MAX_APPLY = 2000
ITER_BASIS = 80
ITER_SEED = 0


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
        self.norm_method: str | None = None  # "exact" or "lanczos" once norm() has run

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
        EXACT_MAX_SIDE and in*out <= EXACT_MAX_ENTRIES; otherwise Lanczos (accelerated power
        iteration) on W^T W (seed ITER_SEED, relative tolerance ITER_RTOL) times ITER_SAFETY
        = 1.01, an upper bound. ``norm_method`` says which ("exact" or "lanczos").
        """
        if self._norm is None:
            self._norm, self.norm_method = self._compute_norm()
        return self._norm

    @property
    def known_norm(self) -> float | None:
        """||W|| where it is computed or given already, else None (nothing is computed)."""
        return self._norm

    def keep_norm(self, value: float | None, method: str | None) -> None:
        """Sets the norm that :meth:`norm` returns (None: compute it when asked) and how it
        was found, for a map known to have it (a copy, a rescaled map)."""
        self._norm, self.norm_method = value, method

    def _compute_norm(self) -> tuple[float, str]:
        return operator_norm(self)


def operator_norm(op: AffineMap) -> tuple[float, str]:
    """||W|| of ``op`` and how it was found: exact or Lanczos (see :meth:`AffineMap.norm`)."""
    if use_exact_norm(op.in_numel, op.out_numel):
        return exact_norm_of_matrix(op.dense(dtype=torch.float64)), "exact"
    return lanczos_norm(op) * ITER_SAFETY, "lanczos"


def use_exact_norm(n: int, m: int) -> bool:
    """Whether an n -> m map is small enough for the exact norm (reads the module limits)."""
    return min(n, m) <= EXACT_MAX_SIDE and n * m <= EXACT_MAX_ENTRIES


def exact_norm_of_matrix(w: Tensor) -> float:
    """Largest singular value via eigvalsh of the smaller Gram matrix (float64, ~1e-15 rel)."""
    w = w.to(torch.float64)
    if w.numel() == 0:
        return 0.0
    g = w.T @ w if w.shape[1] <= w.shape[0] else w @ w.T
    return float(torch.linalg.eigvalsh(g)[-1].clamp_min(0).sqrt())


def lanczos_norm(op: AffineMap, rtol: float = ITER_RTOL, max_apply: int = ITER_MAX_APPLY) -> float:
    """sqrt of the largest eigenvalue of W^T W by restarted Lanczos, float64, seeded start.

    Lanczos is power iteration accelerated: after k products with W^T W its Ritz value is
    at least the power-iteration Rayleigh quotient from the same start (the power iterate lies
    in the same Krylov space) and at most ||W||^2. Stops when the Ritz value changes by less
    than ``rtol`` (relative) in one step and its residual is below 1e-3 of it. Full
    re-orthogonalisation; at most ITER_BASIS vectors (or 256 MB) are kept before a restart.
    """
    work, device = op.to(dtype=torch.float64), op.device or torch.device("cpu")
    n = op.in_numel
    basis = int(min(ITER_BASIS, max(8, 2**25 // max(n, 1))))
    gen = torch.Generator().manual_seed(ITER_SEED)
    v = torch.randn(n, generator=gen, dtype=torch.float64).to(device)
    v = v / v.norm()
    shape = (1, *op.in_shape)

    def gram(x: Tensor) -> Tensor:
        return work.adjoint(work.linear(x.reshape(shape))).reshape(-1)

    applied, theta = 0, 0.0
    while True:
        vs = torch.zeros(basis, n, dtype=torch.float64, device=device)
        tri = torch.zeros(basis, basis, dtype=torch.float64)
        vs[0] = v
        theta_old: float | None = None  # the first Ritz value after a restart repeats the last
        for j in range(basis):
            w = gram(vs[j])
            applied += 1
            vj = vs[: j + 1]
            h = vj @ w
            w = w - vj.T @ h
            h2 = vj @ w  # second Gram-Schmidt pass: orthogonality to machine precision
            w = w - vj.T @ h2
            tri[j, j] = float(h[j] + h2[j])
            beta = float(w.norm())
            evals, evecs = torch.linalg.eigh(tri[: j + 1, : j + 1])
            theta = float(evals[-1])
            if theta <= 0.0 and beta == 0.0:
                return 0.0
            resid = beta * abs(float(evecs[-1, -1]))
            converged = theta_old is not None and theta - theta_old <= rtol * theta \
                and resid <= 1e-3 * theta
            if converged or beta <= 1e-13 * theta or applied >= max_apply:
                return math.sqrt(max(theta, 0.0))
            theta_old = theta
            if j + 1 < basis:
                vs[j + 1] = w / beta
                tri[j, j + 1] = tri[j + 1, j] = beta
        y = vs.T @ evecs[:, -1].to(device)
        v = y / y.norm()
