"""The roles in an inversion, as structural types (``typing.Protocol``).

A solver reads a :class:`Problem`; a problem holds a :class:`Network` of :class:`Layer` s, each an
affine :class:`Operator` followed by a proximal :class:`Activation`, and a regulariser. These
protocols name exactly what the code uses of each role, so that the type checker can check the
solvers without importing the concrete classes (which would tie the maths to model loading):

======================  ==================================================================
protocol                concrete class today
======================  ==================================================================
Operator                ``lbi_engine.operators.AffineMap`` and its subclasses
Activation              ``lbi_engine.activations.ProximalActivation`` and its subclasses
Layer / Network         ``lbi_engine.models.network.LiftedLayer`` / ``LiftedNetwork``
Regulariser             ``lbi_engine.regularisers.Regulariser`` (acts on images)
InputRegulariser        ``lbi_engine.problem.ShapedRegulariser`` (the same, on network inputs)
Problem                 ``lbi_engine.problem.InversionProblem``
Solver                  the ``run_*`` generators in ``lbi_engine.solvers`` (``METHODS``)
======================  ==================================================================

This module imports only typing and torch, never another lbi module, so any module may import
it without creating an import cycle. Attributes are read-only properties here: a protocol
member declared as a plain attribute would also promise that callers may assign it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Protocol

import torch
from torch import Tensor

#: A step size: one number, or one per sample (a tensor broadcasting over the batch).
Step = float | Tensor


class Operator(Protocol):
    """x -> W x + b on samples of shape ``in_shape``; every tensor has a leading batch dim."""

    @property
    def in_shape(self) -> tuple[int, ...]: ...

    @property
    def out_shape(self) -> tuple[int, ...]: ...

    def linear(self, x: Tensor) -> Tensor:
        """W x: (B, *in_shape) -> (B, *out_shape)."""

    def adjoint(self, r: Tensor) -> Tensor:
        """W^T r: (B, *out_shape) -> (B, *in_shape)."""

    def apply(self, x: Tensor) -> Tensor:
        """W x + b."""

    def norm(self) -> float:
        """The operator norm ||W|| (cached by the implementations)."""


class Activation(Protocol):
    """sigma = prox_Psi with its Bregman loss B_Psi (MATH.md §1.1); per-sample values are (B,)."""

    @property
    def name(self) -> str: ...

    def sigma(self, z: Tensor) -> Tensor: ...

    def bregman(self, x: Tensor, z: Tensor) -> Tensor: ...

    def bregman_in_domain(self, x: Tensor, z: Tensor) -> Tensor: ...

    def prox(self, v: Tensor, t: Step) -> Tensor: ...

    def project(self, x: Tensor) -> Tensor: ...

    def spec(self) -> dict[str, Any]: ...


class Layer(Protocol):
    """One lifted layer: x_l = sigma_l(W_l x_{l-1} + b_l)."""

    @property
    def affine(self) -> Operator: ...

    @property
    def activation(self) -> Activation: ...


class Network(Protocol):
    """A chain of lifted layers; ``input_shape``/``output_shape`` exclude the batch dim."""

    @property
    def layers(self) -> Sequence[Layer]: ...

    @property
    def input_shape(self) -> tuple[int, ...]: ...

    @property
    def output_shape(self) -> tuple[int, ...]: ...

    @property
    def name(self) -> str: ...

    @property
    def dtype(self) -> torch.dtype: ...

    @property
    def device(self) -> torch.device: ...

    def forward(self, x: Tensor) -> Tensor: ...

    def forward_states(self, x: Tensor) -> list[Tensor]:
        """x_1 .. x_L for input x_0."""

    def pre_activation(self, index: int, x_prev: Tensor, /) -> Tensor:
        """W_l x_{l-1} + b_l of layer ``index`` (0-based)."""

    @property
    def is_chain(self) -> bool:
        """False when a layer takes several earlier states (a graph, MATH.md §5.6)."""

    def terms(self, index: int, /) -> Sequence[tuple[int, Operator]]:
        """[(state j, A_{l,j}), ...] of layer ``index`` (states: 0 the input)."""

    def pre_activation_of(self, index: int, states: Sequence[Tensor], /) -> Tensor:
        """sum_j A_{l,j} x_j + b_l of layer ``index`` from states [x_0, x_1, ...]."""


class Regulariser(Protocol):
    """The prior R on images (B, C, H, W) or vectors, as the solvers use it.

    R(x) = g(K x) with a linear K (the identity for pointwise priors) plus the box [lo, hi];
    ``has_dual`` says whether the solvers must treat K explicitly (TV).
    """

    @property
    def name(self) -> str: ...

    @property
    def has_dual(self) -> bool: ...

    @property
    def lo(self) -> float: ...

    @property
    def hi(self) -> float: ...

    @property
    def constrained(self) -> bool:
        """Whether the box [lo, hi] constrains anything."""

    def value(self, x: Tensor) -> Tensor:
        """R(x) per sample, (B,)."""

    def K(self, x: Tensor) -> Tensor: ...  # the operator's conventional name

    def KT(self, p: Tensor) -> Tensor: ...

    def K_norm_sq(self, x_shape: tuple[int, ...]) -> float: ...

    def prox_dual(self, p: Tensor, step: Step, alpha: Step) -> Tensor: ...

    def prox_primal(self, x: Tensor, step: Step, alpha: Step) -> Tensor: ...

    def subgradient(self, x: Tensor) -> Tensor: ...


class InputRegulariser(Protocol):
    """A :class:`Regulariser` seen on the network's input shape (``Problem.reg``): it reshapes
    inputs to ``image_shape`` and back, so ``K_norm_sq`` needs no shape."""

    @property
    def name(self) -> str: ...

    @property
    def has_dual(self) -> bool: ...

    @property
    def image_shape(self) -> tuple[int, ...]: ...

    @property
    def inner(self) -> Regulariser:
        """The regulariser itself, on images of ``image_shape``."""

    def value(self, x: Tensor) -> Tensor: ...

    def K(self, x: Tensor) -> Tensor: ...

    def KT(self, p: Tensor) -> Tensor: ...

    def K_norm_sq(self) -> float: ...

    def prox_dual(self, p: Tensor, step: float, alpha: float) -> Tensor: ...

    def prox_primal(self, x: Tensor, step: float, alpha: float) -> Tensor: ...

    def subgradient(self, x: Tensor) -> Tensor: ...


class Problem(Protocol):
    """What a solver reads from an inversion problem (MATH.md §5.1); no solver state.

    ``y_delta`` is (B, *network.output_shape); ``x_true`` and ``delta`` are optional (PSNR/SSIM,
    discrepancy principle); ``reg`` is ``regulariser`` on the input shape. A problem is a
    dataclass: solvers derive variants (another alpha, one stage) with ``dataclasses.replace``.
    """

    __dataclass_fields__: ClassVar[dict[str, Any]]  # what typeshed's DataclassInstance asks

    network: Network
    y_delta: Tensor
    regulariser: Regulariser
    alpha: float
    x_true: Tensor | None
    data_range: float
    display_offset: float
    delta: Tensor | None
    layer_alphas: list[float] | None
    image_shape: tuple[int, ...] | None
    extras: dict[str, Any]
    feature_priors: Any  # lbi_engine.priors.feature.FeaturePriors | None

    @property
    def reg(self) -> InputRegulariser: ...

    @property
    def batch(self) -> int: ...

    @property
    def depth(self) -> int: ...

    @property
    def input_shape(self) -> tuple[int, ...]: ...

    @property
    def device(self) -> torch.device: ...

    @property
    def dtype(self) -> torch.dtype: ...

    def zeros_input(self) -> Tensor: ...

    def layer_alpha(self, index: int) -> float: ...

    def forward_aux(self, x0: Tensor) -> list[Tensor]: ...

    def objective_parts(self, x0: Tensor, aux: list[Tensor] | None = None
                        ) -> dict[str, Tensor]: ...


class Solver(Protocol):
    """An inversion method: a generator of ``IterateRecord`` s (``lbi_engine.solvers.base``).

    ``stop`` is a ``StopRule``, ``options`` a ``SolverOptions``, ``cancel`` a ``CancelToken`` or
    None, ``init`` a warm start (``solvers.warm_start``). Those classes live in the solvers
    package, which imports this module, so they are ``Any`` here (no import cycle).
    """

    def __call__(self, problem: Problem, stop: Any, options: Any, init: dict[str, Any] | None,
                 cancel: Any, report_every: int, /) -> Iterator[Any]: ...
