"""The prepared run (``PreparedRun``, what :func:`lbi_engine.api.prepare` returns) and the
arrays it turns into display images: an input in [0, 1] space, feature maps tiled in a grid."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch import Tensor

from lbi_engine.problem import InversionProblem
from lbi_engine.request import InversionRequest


@dataclass(kw_only=True)
class PreparedRun:
    """A request made concrete: network loaded, problem built, references computed.

    Attributes:
        request: the run record it was prepared from.
        problem: the inversion problem the solver runs on.
        method: the method that runs, resolved once here from ``request.method`` for this
            problem (``"auto"`` and the alias ``"pdhg"`` never reach the solver).
        bundle: the loaded network (``lbi_engine.models.zoo.ModelBundle``: encoder,
            preprocessing, decoder); None for a problem built by hand.
        truth_image: the ground truth in display space; None without one.
        decoder_image: the network's decoder applied to the noisy code; None without one.
        decoder_psnr: that image's PSNR against the truth; None without either.
        delta: the noise level delta = sqrt(delta_squared) (MATH.md §7); None for measured
            data.
        delta_squared: the Bregman distance of the noisy code from the clean one's
            pre-activation (MATH.md §7); None for measured data.
        noise_norm: ||y_delta - y||, the norm of the noise after projection (the
            discrepancy principle's delta); None for measured data.
        y_clean: the noise-free code; None for measured data.
    """

    request: InversionRequest
    problem: InversionProblem
    method: str
    bundle: Any = None
    truth_image: np.ndarray | None = None
    decoder_image: np.ndarray | None = None
    decoder_psnr: float | None = None
    delta: float | None = None
    delta_squared: float | None = None
    noise_norm: float | None = None
    y_clean: Tensor | None = None

    def to_display(self, x: Any) -> np.ndarray:
        """A network-space input (one sample, numpy or tensor, with or without batch dim) as
        a display image in [0, 1] space: (H, W) for one channel, else (C, H, W)."""
        array = x.detach().cpu().numpy() if isinstance(x, Tensor) else np.asarray(x)
        shape = self.problem.image_shape or self.problem.input_shape
        array = array.reshape(shape).astype(np.float32, copy=False)
        array = self.bundle.preprocessing.undo(array)
        array = np.asarray(array, dtype=np.float32)
        return array[0] if array.ndim == 3 and array.shape[0] == 1 else array

    def aux_images(self, aux: list[Any]) -> list[np.ndarray]:
        """Auxiliary variables as 2-D arrays: feature maps (C, H, W) tiled in a grid,
        vectors shaped into the most square rectangle."""
        return [
            tile_feature_maps(np.asarray(a.detach().cpu() if isinstance(a, Tensor) else a))
            for a in aux
        ]


def tile_feature_maps(array: np.ndarray) -> np.ndarray:
    """(C, H, W) -> grid image with a 1-px gap; (N,) -> rows x cols; one sample."""
    if array.ndim >= 1 and array.shape[0] == 1 and array.ndim in (2, 4):
        array = array[0]
    if array.ndim == 3:
        channels, height, width = array.shape
        cols = math.ceil(math.sqrt(channels))
        rows = math.ceil(channels / cols)
        grid = np.full((rows * (height + 1) - 1, cols * (width + 1) - 1), np.nan, np.float32)
        for c in range(channels):
            r, q = divmod(c, cols)
            grid[
                r * (height + 1) : r * (height + 1) + height,
                q * (width + 1) : q * (width + 1) + width,
            ] = array[c]
        return grid
    flat = array.reshape(-1).astype(np.float32)
    cols = math.ceil(math.sqrt(flat.size))
    rows = math.ceil(flat.size / cols)
    padded = np.full(rows * cols, np.nan, np.float32)
    padded[: flat.size] = flat
    return padded.reshape(rows, cols)


def squeeze_display(array: np.ndarray) -> np.ndarray:
    while array.ndim > 2 and array.shape[0] == 1:
        array = array[0]
    return array
