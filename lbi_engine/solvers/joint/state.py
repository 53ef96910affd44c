"""What the step strategies and the records read of the joint iteration's state.

``fista.JointFista`` holds the iterates of all blocks side by side in flat (B, N) buffers,
four slots rotating between x, the previous x, the new x and scratch. The strategies that
take its step (``steps``, ``compiled_step``) and the records (``records``) work on those
buffers directly; this protocol names the fields they use, so that they read typed public
fields and not the class's internals (a protocol rather than the class itself: ``fista``
imports those modules, so they cannot import it back).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from torch import Tensor

from lbi_engine.operators.momentum import Momentum, ScalarMomentum
from lbi_engine.protocols import Layer, Problem
from lbi_engine.regularisers import TVProx
from lbi_engine.solvers.joint.one_sample import OneSampleGradient


class FistaState(Protocol):
    """The public fields of ``fista.JointFista`` that its step strategies and records use."""

    #: TV prox steps taken so far (the compiled step adds its own)
    inner_steps: int

    @property
    def problem(self) -> Problem: ...
    @property
    def layers(self) -> Sequence[Layer]: ...
    @property
    def maps(self) -> Sequence[Any]:
        """Each layer's map as the step uses it (small convolutions as CSR matrices)."""
    @property
    def graph_maps(self) -> list[list[tuple[int, Any]]] | None:
        """Per layer of a graph network, its terms (input block, map); None for a chain."""
    @property
    def alpha(self) -> float: ...
    @property
    def lam(self) -> float:
        """The TV prox's weight in the x_0 step (alpha tau_0, or its metric form)."""
    @property
    def tv_prox(self) -> TVProx | None: ...
    @property
    def tv(self) -> bool:
        """Whether the image block's prior is TV (else the Gaussian prior)."""
    @property
    def momentum(self) -> Momentum | ScalarMomentum: ...
    @property
    def relu_aux(self) -> bool:
        """Whether every auxiliary block's prox is the projection onto x >= 0."""
    @property
    def one(self) -> OneSampleGradient | None:
        """The one-sample gradient on buffers, or None (a batch, a graph network)."""
    @property
    def xs(self) -> list[Tensor]:
        """The current iterates, block by block."""
    @property
    def slots(self) -> list[Tensor]:
        """The four (B, N) buffers that rotate between x, prev, new and scratch."""
    @property
    def slot_flat(self) -> list[list[Tensor]]:
        """Per slot, the blocks of its first sample as flat 1-D views."""
    @property
    def slot_x(self) -> int: ...
    @property
    def slot_prev(self) -> int: ...
    @property
    def slot_new(self) -> int: ...
    @property
    def slot_scratch(self) -> int: ...
    @property
    def pre_activations(self) -> list[Tensor] | None:
        """The current iterate's pre-activations W_l x_l + b_l per layer, where the step
        keeps them (the compiled one), else None."""
    @property
    def y_flat(self) -> list[Tensor]:
        """The blocks of y's first sample as flat 1-D views."""
    @property
    def grad_flat(self) -> list[Tensor]:
        """The blocks of the gradient's first sample as flat 1-D views."""
    @property
    def y(self) -> Tensor:
        """The extrapolated point the next step starts from, (B, N)."""
    @property
    def grad(self) -> Tensor:
        """The gradient's (B, N) buffer."""
    @property
    def tau(self) -> Tensor:
        """The step per coordinate, (N,)."""
    @property
    def n0(self) -> int:
        """The number of entries of the image block x_0 (the first of each buffer)."""

    def tv_value(self, x0: Tensor) -> Tensor:
        """R(x_0) per sample."""
        ...

    def propose(self) -> list[Tensor]:
        """The prox-gradient step from y into the free slot; its blocks."""
        ...

    def rotate(self) -> None:
        """The proposed iterate becomes x (the slots rotate)."""
        ...
