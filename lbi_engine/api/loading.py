"""``prepare``: a request made concrete. The network is loaded, the sample read and checked
against the network's input before lifting, the noise simulated, the regulariser chosen and
the problem built; the references a run is judged against (the truth, the decoder's image)
are computed once here."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from lbi_engine.api.inputs import as_network_input, feature_priors, load_truth
from lbi_engine.api.prepared import PreparedRun, method_for, squeeze_display
from lbi_engine.api.warm_up import warm_up
from lbi_engine.errors import ShapeMismatchError
from lbi_engine.problem import InversionProblem
from lbi_engine.request import DTYPES, InversionRequest


def prepare(request: InversionRequest, bundle: Any = None) -> PreparedRun:
    """Loads what the request names and builds the inversion problem.

    Pass ``bundle`` (a loaded ModelBundle for the same network) to skip reloading it.
    """
    from lbi_engine import data as data_mod
    from lbi_engine import metrics, noise
    from lbi_engine.models.declared import declared_input_shape
    from lbi_engine.models.zoo import load_network

    request.validate()
    device, dtype = torch.device(request.resolved_device()), DTYPES[request.dtype]
    # The data is read and checked against the shape the network declares before the network
    # is lifted (seconds to a minute for a large one): a mismatch is refused at once.
    declared = tuple(bundle.input_shape) if bundle is not None else declared_input_shape(
        request.network, request.input_shape)
    if declared is None and bundle is None:  # the file does not say: lift first
        bundle = load_network(
            request.network, input_shape=request.input_shape, allow_code=request.allow_code
        )
        declared = tuple(bundle.input_shape)
    assert declared is not None
    truth_display = load_truth(request, declared)
    source = request.truth or request.image or f"{request.dataset} sample {request.index}"
    if truth_display is not None:
        as_network_input(truth_display, declared, source)
    if bundle is None:
        bundle = load_network(
            request.network, input_shape=request.input_shape, allow_code=request.allow_code
        )
    encoder = warm_up(bundle.encoder, request.method, device, dtype)
    input_shape = tuple(encoder.input_shape)
    from lbi_engine.priors.input import run_regulariser

    regulariser, regulariser_rule = run_regulariser(
        request.regulariser, request.network, getattr(bundle, "sha256", None), input_shape,
        request.input_prior, request.noise_std_known())
    x_true = y_clean = None
    delta = delta_sq = noise_norm = None
    if truth_display is not None:
        shaped = as_network_input(truth_display, input_shape, source)
        x_net = bundle.preprocessing.apply(shaped)
        x_true = torch.as_tensor(np.asarray(x_net), dtype=dtype, device=device)
        noisy = noise.make_noisy_data(encoder, x_true, request.noise_std, seed=request.seed)
        y_delta, y_clean = noisy.y_delta, noisy.y
        delta = float(noisy.delta[0])
        delta_sq = float(noisy.delta_squared[0])
        noise_norm = float(noisy.noise_norm[0])
    else:
        assert request.data is not None  # _load_truth gives None only for measured data
        measured = np.asarray(data_mod.read_array(request.data), dtype=np.float32)
        out_shape = tuple(encoder.output_shape)
        if measured.size != math.prod(out_shape):
            raise ShapeMismatchError(
                f"{request.data} has shape {measured.shape} but the network's output is "
                f"{out_shape}; give one measured code of that shape."
            )
        y_delta = torch.as_tensor(measured.reshape(1, *out_shape), dtype=dtype, device=device)
        last = encoder.layers[-1].activation
        if not bool(last.in_domain(y_delta, atol=1e-6).all()):
            import warnings

            warnings.warn(
                f"{request.data}: values outside the domain of the last activation were "
                "clipped into it (as the paper does for ReLU).",
                stacklevel=2,
            )
        y_delta = last.project(y_delta)
    preprocessing = bundle.preprocessing
    problem = InversionProblem(
        network=encoder,
        y_delta=y_delta,
        regulariser=regulariser,
        alpha=request.fixed_alpha(),
        x_true=x_true,
        data_range=float(getattr(preprocessing, "data_range", 1.0)),
        display_offset=float(getattr(preprocessing, "display_offset", 0.0)),
        delta=None
        if noise_norm is None
        else torch.tensor([noise_norm], device=device, dtype=dtype),
        layer_alphas=request.layer_alphas,
        feature_priors=feature_priors(request, bundle, encoder),
        extras={"regulariser_rule": regulariser_rule,
                "regulariser_run": regulariser.describe()},
    )
    method = method_for(request.method, problem)  # resolved (or refused) once, here
    decoder_image = decoder_psnr = None
    if getattr(bundle, "decoder", None) is not None:
        decoded = bundle.decode(y_delta.to("cpu", torch.float32))
        decoder_image = squeeze_display(np.asarray(decoded, dtype=np.float32))
        if truth_display is not None:
            reference = torch.as_tensor(truth_display.reshape(decoder_image.shape))
            decoder_psnr = float(
                metrics.psnr(torch.as_tensor(decoder_image)[None], reference[None], data_range=1.0)[
                    0
                ]
            )
    truth_image = None
    if truth_display is not None:
        image_shape = problem.image_shape or input_shape
        truth_image = squeeze_display(truth_display.reshape(image_shape))
    return PreparedRun(request=request, problem=problem, method=method, bundle=bundle,
                       truth_image=truth_image, decoder_image=decoder_image,
                       decoder_psnr=decoder_psnr, delta=delta, delta_squared=delta_sq,
                       noise_norm=noise_norm, y_clean=y_clean)
