"""lbi's module-level leaves shared by the module walker and the torch.fx walker.

:mod:`lbi_engine.models.layer_lifting` walks modules and calls
:mod:`lbi_engine.models.fx_chain` for traced ones; the fx walker needs to know which modules
are leaves and how to wrap an activation as a module. Both live here, below both walkers, so
neither imports the other in a circle.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from lbi_engine.operators import Reshape, ScaleShift

__all__ = ["LiftedActivation", "is_leaf"]


class LiftedActivation(nn.Module):
    """Module form of a ProximalActivation (forward = sigma), for importers that build the
    activation directly (ONNX ops via activation_from_onnx, one-sided clamps)."""

    def __init__(self, activation: Any) -> None:
        super().__init__()
        self.activation = activation

    def forward(self, x: Tensor) -> Tensor:
        return self.activation.sigma(x)

    def extra_repr(self) -> str:
        return repr(self.activation.spec())


def is_leaf(m: nn.Module) -> bool:
    """Layers whose forward is torch.nn's own (incl. user subclasses that only change
    __init__) and lbi's small modules are leaves; Sequential and user forwards are walked."""
    if isinstance(m, (Reshape, ScaleShift, LiftedActivation)):
        return True
    if isinstance(m, nn.Sequential):
        return False
    forward = getattr(type(m), "forward", None)
    return getattr(forward, "__module__", "").startswith("torch.nn")
