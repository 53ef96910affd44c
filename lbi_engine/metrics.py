"""Evaluation metrics, all per sample (shape ``(B,)``): MATH.md §5.1, §8.3, §8.4.

Image metrics take ``(B, H, W)`` or ``(B, C, H, W)``; PSNR and norms accept any shape with a
leading batch dim. Everything is computed on the inputs' device except SSIM, which runs
scikit-image on CPU numpy (it is an evaluation metric, not part of any iteration).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from lbi_engine.errors import InputError, ShapeMismatchError
from lbi_engine.operators.finite_differences import check_image, tv_aniso_value, tv_iso_value
from lbi_engine.protocols import Network
from lbi_engine.regularisers import Regulariser, make_regulariser

#: SSIM of Wang et al. (2004): 11-tap Gaussian window, sigma 1.5, population covariance.
SSIM_SIGMA = 1.5
SSIM_FULL_WINDOW = 11


def _check_pair(x: Tensor, ref: Tensor, what: str = "x", ref_what: str = "ref") -> None:
    for t, name in ((x, what), (ref, ref_what)):
        if not isinstance(t, Tensor) or t.ndim < 1:
            raise InputError(f"{name}: expected a torch tensor with a leading batch dim (B, ...).")
    if x.shape != ref.shape:
        raise ShapeMismatchError(
            f"{what} has shape {tuple(x.shape)} but {ref_what} has {tuple(ref.shape)}; "
            "compare images of the same shape (one per sample)."
        )


def _check_range(data_range: float) -> float:
    r = float(data_range)
    if not math.isfinite(r) or r <= 0:
        raise InputError(
            f"data_range={data_range}: must be a finite number > 0 (1.0 for images in [0, 1])."
        )
    return r


def psnr(x: Tensor, ref: Tensor, data_range: float = 1.0) -> Tensor:
    """10 log10(data_range^2 / MSE) per sample; +inf where x equals ref.

    data_range is explicit on purpose (MATH.md §8.4): for centred images (shifted by a
    scalar) keep the range of the uncentred images (1 for [0, 1]); inferring it from the
    values (as skimage does for negative floats: 2) inflates PSNR by 6.02 dB.
    The MSE is accumulated in float64 so float32 inputs lose nothing in the log.
    """
    _check_pair(x, ref)
    r = _check_range(data_range)
    mse = (x.double() - ref.double()).square().flatten(1).mean(dim=1)
    out = 10.0 * torch.log10(r * r / mse)  # mse = 0 -> r^2/0 = inf -> +inf (no warning in torch)
    return out.to(x.dtype)


def _ssim_window(side: int) -> int | None:
    """The window for the smaller image side: None (skimage's 11-tap default) when it fits,
    else the largest odd size <= side (>= 3). The Gaussian filter itself keeps sigma 1.5;
    the window only sets the border crop, as in skimage."""
    if side >= SSIM_FULL_WINDOW:
        return None
    return side if side % 2 == 1 else side - 1


def ssim(x: Tensor, ref: Tensor, data_range: float = 1.0) -> Tensor:
    """Structural similarity per sample, by ``skimage.metrics.structural_similarity``.

    Wang et al.'s setting: ``gaussian_weights=True, sigma=1.5, use_sample_covariance=False``
    and an explicit ``data_range``. ``(B, C, H, W)`` with C > 1 averages over channels
    (``channel_axis=0``); C = 1 is treated as ``(B, H, W)``. Images smaller than 11 px on a
    side use the largest odd window that fits. Images with a side below 3 px give NaN: there
    is no 3x3 neighbourhood to take local means and variances over, so SSIM is undefined
    (a number there would be an artefact of the boundary padding).
    """
    _check_pair(x, ref)
    r = _check_range(data_range)
    check_image(x, "x (for SSIM)")
    batch, h, w = x.shape[0], x.shape[-2], x.shape[-1]
    side = min(h, w)
    if side < 3:
        return torch.full((batch,), math.nan, dtype=x.dtype, device=x.device)
    from skimage.metrics import structural_similarity  # lazy: no work at import time

    a = x.detach().to("cpu", torch.float64).reshape(batch, -1, h, w).numpy()
    b = ref.detach().to("cpu", torch.float64).reshape(batch, -1, h, w).numpy()
    multichannel = a.shape[1] > 1
    values = []
    for i in range(batch):
        im1, im2 = (a[i], b[i]) if multichannel else (a[i, 0], b[i, 0])
        values.append(structural_similarity(
            im1, im2, data_range=r, gaussian_weights=True, sigma=SSIM_SIGMA,
            use_sample_covariance=False, win_size=_ssim_window(side),
            channel_axis=0 if multichannel else None,
        ))
    return torch.tensor(values, dtype=x.dtype, device=x.device)


def l2_norm(x: Tensor) -> Tensor:
    """Euclidean norm over all non-batch dims, ``(B,)``."""
    return x.flatten(1).norm(dim=1)


def tv_iso(x: Tensor) -> Tensor:
    """Isotropic TV (channels coupled), ``(B,)``; MATH.md §4.1."""
    return tv_iso_value(x)


def tv_aniso(x: Tensor) -> Tensor:
    """Anisotropic TV ||grad x||_1, ``(B,)``; MATH.md §4.1."""
    return tv_aniso_value(x)


def discrepancy(network: Network, x: Tensor, y_delta: Tensor) -> Tensor:
    """||sigma_L(f(x)) - y_delta|| per sample; ``network.forward`` includes the last activation."""
    out = network.forward(x)
    _check_pair(out, y_delta, "network output", "y_delta")
    return (out - y_delta).flatten(1).norm(dim=1)


def _alpha_times(alpha: float | Tensor, value: Tensor) -> Tensor:
    """alpha * R with +inf kept for violated constraints even when alpha = 0."""
    a = alpha.to(value) if isinstance(alpha, Tensor) else float(alpha)
    return torch.where(torch.isinf(value), value, a * torch.nan_to_num(value, posinf=0.0))


def objective_parts(
    network: Network,
    x0: Tensor,
    aux: list[Tensor] | None,
    y_delta: Tensor,
    regulariser: Any,
    alpha: float | Tensor,
) -> dict[str, Tensor]:
    """The lifted objective of MATH.md §5.1, per sample, split into its parts.

    sum_l B_{Psi_l}(x_l, W_l x_{l-1} + b_l) + alpha R(x_0) with x_L = y_delta.
    ``aux`` is [x_1, ..., x_{L-1}] (None: the forward states of x0, so every term but the
    last is 0). Returns ``bregman`` (B, L), ``reg`` (B,) = alpha R(x0), ``total`` (B,) and
    ``discrepancy`` (B,) = ||sigma_L(f(x0)) - y_delta||.
    """
    layers = list(network.layers)
    if aux is None:
        aux = list(network.forward_states(x0))[:-1]
    if len(aux) != len(layers) - 1:
        raise ShapeMismatchError(
            f"aux has {len(aux)} auxiliary variables but the network has {len(layers)} layers; "
            f"give {len(layers) - 1} (x_1 .. x_L-1) or None for the forward states."
        )
    if isinstance(regulariser, (str, dict)):
        regulariser = make_regulariser(regulariser)
    terms = []
    prev = x0
    states = [x0, *aux, y_delta]
    for index, (layer, target) in enumerate(zip(layers, states[1:], strict=True)):
        z = layer.affine.apply(prev) if getattr(network, "is_chain", True) else \
            network.pre_activation_of(index, states)  # a graph (MATH.md §5.6)
        terms.append(layer.activation.bregman(target, z))
        prev = target
    bregman = torch.stack(terms, dim=1)
    reg = _alpha_times(alpha, regulariser.value(x0))
    return {
        "bregman": bregman,
        "reg": reg,
        "total": bregman.sum(dim=1) + reg,
        "discrepancy": discrepancy(network, x0, y_delta),
    }


def _inner(a: Tensor, b: Tensor) -> Tensor:
    return (a * b).flatten(1).sum(dim=1)


def symmetric_bregman_parts(
    reg: Regulariser | str | dict,
    x_a: Tensor,
    q_a: Tensor,
    x_true: Tensor,
    q_true: Tensor | None = None,
) -> dict[str, Tensor]:
    """D^symm_R(x_a, x_true) = <x_a - x_true, q_a - q_true> as two Bregman brackets (MATH §8.3).

    For 1-homogeneous R (TV, l1) the robust form is used:
    ``bracket_alpha = R(x_a) - <q_true, x_a>``, ``bracket_true = R(x_true) - <q_a, x_true>``;
    each is >= 0 as soon as q lies in the dual ball (q = -div z, |z_ij| <= 1 for TV), even
    if q is only an approximate subgradient (e.g. a PDHG dual iterate). Otherwise the
    Bregman distances ``R(x_a) - R(x_t) - <q_t, x_a - x_t>`` and the mirrored one are used.
    ``q_true`` defaults to ``reg.subgradient(x_true)`` (normalised gradient, 0 where flat:
    [AMBIGUITY 6]). Constraints are ignored (they add 0 for feasible points).
    Returns ``total``, ``bracket_alpha``, ``bracket_true`` and ``inner`` (the plain inner
    product form, equal to ``total`` when both q are exact subgradients), all (B,).
    """
    shape = getattr(reg, "image_shape", None)
    inner = getattr(reg, "inner", None)
    if not isinstance(reg, Regulariser) and isinstance(inner, Regulariser):
        # a problem's ShapedRegulariser: work on its image shape (views, so no copies)
        def img(t: Tensor) -> Tensor:
            return t if shape is None else t.reshape(t.shape[0], *shape)

        reg, x_a, q_a, x_true = inner, img(x_a), img(q_a), img(x_true)
        q_true = None if q_true is None else img(q_true)
    reg = make_regulariser(reg)
    _check_pair(x_a, x_true, "x_a", "x_true")
    _check_pair(q_a, x_a, "q_a", "x_a")
    if q_true is None:
        q_true = reg.subgradient(x_true)
    _check_pair(q_true, x_true, "q_true", "x_true")
    r_a, r_t = reg.raw_value(x_a), reg.raw_value(x_true)
    if reg.homogeneous:
        bracket_alpha = r_a - _inner(q_true, x_a)
        bracket_true = r_t - _inner(q_a, x_true)
    else:
        bracket_alpha = r_a - r_t - _inner(q_true, x_a - x_true)
        bracket_true = r_t - r_a - _inner(q_a, x_true - x_a)
    return {
        "total": bracket_alpha + bracket_true,
        "bracket_alpha": bracket_alpha,
        "bracket_true": bracket_true,
        "inner": _inner(x_a - x_true, q_a - q_true),
    }


def symmetric_bregman(
    reg: Regulariser | str | dict,
    x_a: Tensor,
    q_a: Tensor,
    x_true: Tensor,
    q_true: Tensor | None = None,
) -> Tensor:
    """D^symm_R(x_a, x_true), ``(B,)``: the ``total`` of :func:`symmetric_bregman_parts`."""
    return symmetric_bregman_parts(reg, x_a, q_a, x_true, q_true)["total"]
