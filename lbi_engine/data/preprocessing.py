"""How display images in [0, 1] become network inputs (an affine map; works on numpy arrays
and torch tensors alike, so it imports neither)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from lbi_engine.errors import InputError

__all__ = ["Preprocessing"]


@dataclass(frozen=True)
class Preprocessing:
    """How display images in [0, 1] become network inputs: ``(x01 - offset) / scale``.

    This is torchvision's ``Normalize(mean=offset, std=scale)`` with scalars. The zoo's
    perceptron autoencoder uses ``offset`` = the mean pixel of the bundled training split
    (MATH.md §9.2, "centred" images); PSNR is always measured after :meth:`undo`, with data
    range 1.
    """

    offset: float = 0.0
    scale: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.offset) and math.isfinite(self.scale) and self.scale > 0):
            raise InputError(f"Preprocessing(offset={self.offset}, scale={self.scale}) is "
                             "invalid; offset must be finite and scale finite and > 0")

    @property
    def is_identity(self) -> bool:
        """True when network inputs are the display images themselves."""
        return self.offset == 0.0 and self.scale == 1.0

    def apply(self, x01: Any) -> Any:
        """Display space [0, 1] -> network input space (tensor or array, any shape)."""
        return x01 if self.is_identity else (x01 - self.offset) / self.scale

    def undo(self, x: Any) -> Any:
        """Network input space -> display space (inverse of :meth:`apply`)."""
        return x if self.is_identity else x * self.scale + self.offset

    def to_dict(self) -> dict[str, float]:
        """JSON-ready form, as stored in model cards."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Preprocessing:
        """Inverse of :meth:`to_dict`; ``None`` means identity."""
        d = d or {}
        return cls(offset=float(d.get("offset", 0.0)), scale=float(d.get("scale", 1.0)))
