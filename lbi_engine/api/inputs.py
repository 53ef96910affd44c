"""What a request names, read and checked before the network is lifted: the ground truth in
display space, its shape against the network's input, and the layer-wise method's feature
prior (checked against the weights it was fitted for)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from lbi_engine.errors import InputError, ShapeMismatchError
from lbi_engine.request import InversionRequest


def load_truth(request: InversionRequest, input_shape: tuple[int, ...]) -> np.ndarray | None:
    """The ground truth in display space [0, 1], shaped like the network input when possible:
    an image is read with the network's channel count (grey for one channel or a flat input,
    RGB for three) and, with ``resize``, at its height and width."""
    from lbi_engine import data

    if request.data:
        return None
    if request.truth:
        return np.asarray(data.read_array(request.truth), dtype=np.float32)
    if request.image:
        size = _input_hw(input_shape) if request.resize else None
        channels = input_shape[0] if len(input_shape) == 3 else 1
        return data.read_image(request.image, size=size, channels=channels)
    return data.sample_array(request.dataset, request.split, request.index)


def _input_hw(shape: tuple[int, ...]) -> tuple[int, int] | None:
    if len(shape) >= 2:
        return (shape[-2], shape[-1])
    side = math.isqrt(shape[0])
    return (side, side) if side * side == shape[0] else None


def as_network_input(truth: np.ndarray, input_shape: tuple[int, ...], source: str) -> np.ndarray:
    size = math.prod(input_shape)
    given = truth.shape[1:] if truth.ndim == 4 and truth.shape[0] == 1 else truth.shape
    if len(given) == 3 and len(input_shape) == 3 and given[0] != input_shape[0]:
        raise ShapeMismatchError(
            f"{source} has {given[0]} channel(s) but the network takes {input_shape[0]} "
            f"(shape {input_shape}); give data with {input_shape[0]} channel(s)."
        )
    if truth.size != size:
        raise ShapeMismatchError(
            f"{source} has shape {truth.shape} ({truth.size} values) but the network expects "
            f"{input_shape} ({size} values); give data of that shape, or use resize for images."
        )
    if not np.isfinite(truth).all():
        raise InputError(f"{source} contains NaN or Inf values; clean the data first.")
    return truth.reshape(1, *input_shape)


def feature_priors(request: InversionRequest, bundle: Any, encoder: Any) -> Any:
    """The learned feature prior for the layer-wise method: the request's file, else the one
    shipped beside a zoo network's weights, else None. Checked against the weights' hash."""
    from lbi_engine.models.zoo import list_zoo
    from lbi_engine.priors import feature as fp

    if len(encoder.layers) < 2:
        return None
    priors: fp.FeaturePriors | None
    if request.feature_prior:
        priors = fp.load_feature_priors(request.feature_prior)
    elif request.network in list_zoo():
        priors = fp.zoo_feature_priors(request.network)
    else:
        return None
    if priors is None:
        return None
    expected = priors.card.get("weights_sha256")
    if expected and bundle.sha256 and expected != bundle.sha256:
        raise InputError(f"the feature prior was fitted for weights {expected[:12]}..., not for "
                         f"{request.network!r} ({bundle.sha256[:12]}...); fit it again with "
                         "`lbi feature-prior`.")
    priors.check_network(encoder)
    return priors
