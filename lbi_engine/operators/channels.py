"""ChannelSlotMap: place a (c, ...) sample into channels [offset, offset + c) of a (C, ...)
one, zeros elsewhere. A channel concatenation cat([x_1, .., x_k], dim=1) is the sum of one such
map per input (MATH.md §5.6); W^T takes the slice back, and ||W|| = 1 (W^T W = I)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from lbi_engine.operators._base import AffineMap


class ChannelSlotMap(AffineMap):
    """x -> y with y[:, offset:offset + c] = x and zeros elsewhere (no bias)."""

    kind = "ChannelSlot"

    def __init__(self, in_shape: Sequence[int], channels: int, offset: int) -> None:
        in_shape = tuple(int(s) for s in in_shape)
        if not in_shape or not 0 <= offset <= channels - in_shape[0]:
            raise ValueError(f"channels [{offset}, {offset + (in_shape or (0,))[0]}) do not fit "
                             f"in {channels} channels")
        super().__init__(in_shape, (int(channels), *in_shape[1:]))
        self.offset = int(offset)
        self._norm, self.norm_method = 1.0, "exact"

    def linear(self, x: Tensor) -> Tensor:
        self._check_in(x)
        out = x.new_zeros((x.shape[0], *self.out_shape))
        out[:, self.offset:self.offset + self.in_shape[0]] = x
        return out

    def adjoint(self, r: Tensor) -> Tensor:
        return r[:, self.offset:self.offset + self.in_shape[0]]

    def describe(self) -> str:
        c = self.in_shape[0]
        return f"ChannelSlot {c}->[{self.offset}:{self.offset + c}] of {self.out_shape[0]}"


__all__ = ["ChannelSlotMap"]
