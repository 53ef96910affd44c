"""Learned Gaussian priors on a network's INPUT: fitting, files, and the regulariser they make.

R(x) = ½ (x - mu)^T Sigma^{-1} (x - mu) with mu and the Ledoit–Wolf shrunk covariance of
clean samples in network-input space (the maths: ``lbi_engine.regularisers._gaussian``;
docs/MATH.md §4.3). The fit is the feature prior's (``feature_prior.fit_gaussian``: the same
shrinkage, the same low rank + diagonal storage); the file is BASE.safetensors (tensors
``mean``, ``factor``, ``diag``, never code) plus BASE.json, a card with the kind, the input
shape, the network's weight hash, the samples' sha256, the command that made it and the
tensor file's sha256, checked on reading. A zoo network's input prior is
``NAME.input.prior.{safetensors,json}`` beside its weights (``lbi prior NAME --out ...``).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lbi_engine.errors import InputError, ModelFileError
from lbi_engine.priors.feature import (
    DEFAULT_RANK,
    fit_gaussian,
    prior_paths,
    read_prior_card,
    read_prior_tensors,
)
from lbi_engine.regularisers import (
    GaussianPrior,
    LowRankGaussian,
    Regulariser,
    make_regulariser,
    regulariser_name,
)

INPUT_PRIOR_KIND = "lbi-input-prior"
INPUT_PRIOR_VERSION = 1
ZOO_SUFFIX = ".input.prior"  # ends in ".prior": list_zoo() skips prior cards
#: The rank-96 prior of a 28x28 input is 0.3 MB; a tensor file bigger than this is refused
#: before it is read into memory (it cannot be an input prior of any network lbi inverts).
MAX_TENSOR_BYTES = 2**31


def fit_input_prior(inputs: Tensor, rank: int = DEFAULT_RANK) -> tuple[LowRankGaussian, dict]:
    """Mean and shrunk covariance of network inputs (N, *input_shape), low rank + diagonal."""
    fitted, info = fit_gaussian(inputs.reshape(inputs.shape[0], -1), rank)
    return LowRankGaussian(fitted.mean, fitted.factor, fitted.diag), info


def samples_sha256(inputs: Tensor) -> str:
    """sha256 of the samples as float32 C-order bytes (what the card names them by)."""
    array = np.ascontiguousarray(inputs.detach().cpu().to(torch.float32).numpy())
    return hashlib.sha256(array.tobytes()).hexdigest()


def save_input_prior(prior: LowRankGaussian, card: dict[str, Any], base: str | os.PathLike[str],
                     overwrite: bool = False) -> tuple[Path, Path]:
    """Writes BASE.safetensors and BASE.json atomically; returns their paths."""
    from safetensors.torch import save as save_safetensors

    from lbi_engine.io import atomic_write_bytes, atomic_write_text, safe_output_path
    from lbi_engine.models.cards import file_sha256

    tensors_path, card_path = prior_paths(base)
    safe_output_path(tensors_path, overwrite)
    safe_output_path(card_path, overwrite)
    tensors = {"mean": prior.mean, "factor": prior.factor, "diag": prior.diag}
    atomic_write_bytes(tensors_path, save_safetensors(
        {k: v.detach().cpu().float().contiguous() for k, v in tensors.items()}))
    full = {"format_version": INPUT_PRIOR_VERSION, "kind": INPUT_PRIOR_KIND, **card,
            "tensors": tensors_path.name, "tensors_sha256": file_sha256(tensors_path)}
    atomic_write_text(card_path, json.dumps(full, indent=2) + "\n")
    return tensors_path, card_path


def load_input_prior(base: str | os.PathLike[str],
                     input_shape: tuple[int, ...] | None = None) -> tuple[LowRankGaussian, dict]:
    """Reads a prior written by :func:`save_input_prior`: card kind and version, the tensor
    file's size and sha256, then the tensors' shapes, finiteness and a positive diagonal; with
    ``input_shape``, that the prior has its size. The prior's label is the file's sha256."""
    tensors_path, card_path, card = read_prior_card(
        base, INPUT_PRIOR_KIND, INPUT_PRIOR_VERSION, "input prior",
        "lbi prior NETWORK --samples FILE --out BASE")
    size = tensors_path.stat().st_size
    if size > MAX_TENSOR_BYTES:
        raise ModelFileError(f"{tensors_path} is {size} bytes, more than an input prior can "
                             f"be ({MAX_TENSOR_BYTES}); it is not one: create the prior again.")
    tensors = read_prior_tensors(tensors_path, card_path, card, "input prior")
    if set(tensors) != {"mean", "factor", "diag"}:
        raise ModelFileError(f"{tensors_path} holds {sorted(tensors)}, not the tensors of an "
                             "input prior (mean, factor, diag); create the prior again.")
    mean, factor, diag = (tensors[k].float() for k in ("mean", "factor", "diag"))
    ok = (mean.ndim == 1 and factor.ndim == 2 and factor.shape[0] == mean.shape[0]
          and factor.shape[1] <= mean.shape[0] and diag.shape == mean.shape
          and bool((diag > 0).all())
          and all(bool(torch.isfinite(t).all()) for t in (mean, factor, diag)))
    if not ok:
        raise ModelFileError(f"{tensors_path}: the tensors are inconsistent or not finite (mean "
                             f"{tuple(mean.shape)}, factor {tuple(factor.shape)}, diag "
                             f"{tuple(diag.shape)}); create the prior again.")
    from lbi_engine.regularisers._gaussian import check_factorisation

    check_factorisation(int(mean.numel()), int(factor.shape[1]), f"input prior {tensors_path}")
    if input_shape is not None and mean.numel() != math.prod(input_shape):
        raise InputError(f"the input prior {card_path} has {mean.numel()} values per sample but "
                         f"the network's input {tuple(input_shape)} has {math.prod(input_shape)}; "
                         "fit a prior for this network (lbi prior NETWORK --out BASE).")
    # the label: the file's sha256, which read_prior_tensors checked against the card
    return LowRankGaussian(mean, factor, diag, label=str(card["tensors_sha256"])), card


def zoo_input_prior_base(name: str) -> Path:
    from lbi_engine.models.zoo import zoo_dir

    return zoo_dir() / f"{name}{ZOO_SUFFIX}"


def has_zoo_input_prior(name: str) -> bool:
    """Whether a bundled network ships an input prior (no file is read)."""
    from lbi_engine.models.zoo import list_zoo

    if name not in list_zoo():
        return False
    return all(p.is_file() for p in prior_paths(zoo_input_prior_base(name)))


def make_card(network_name: str, weights_sha256: str, input_shape: tuple[int, ...], source: str,
              samples_hash: str, command: str, info: dict[str, Any]) -> dict[str, Any]:
    return {"network": network_name, "weights_sha256": weights_sha256,
            "input_shape": list(input_shape), "samples_source": source,
            "samples_sha256": samples_hash, "command": command,
            "model": "N(mean, U U^T + diag(d)) on the network input: Ledoit-Wolf shrunk "
                     "covariance of the clean samples, top-rank eigenpairs + the remaining "
                     "diagonal",
            "created": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            **info}


def resolve_input_prior(path: str | None, network: str, weights_sha256: str | None,
                        input_shape: tuple[int, ...]) -> LowRankGaussian:
    """The prior a run's ``gaussian`` regulariser uses: ``path`` (BASE), else the one shipped
    beside zoo network ``network``; checked against the network's weights and input size."""
    if path:
        prior, card = load_input_prior(path, input_shape)
    elif has_zoo_input_prior(network):
        prior, card = load_input_prior(zoo_input_prior_base(network), input_shape)
    else:
        raise InputError(f"regulariser 'gaussian' needs an input prior and {network!r} ships "
                         "none: fit one with `lbi prior NETWORK --samples FILE --out BASE` and "
                         "give --input-prior BASE.")
    expected = card.get("weights_sha256")
    if expected and weights_sha256 and expected != weights_sha256:
        raise InputError(f"the input prior was fitted for weights {expected[:12]}..., not for "
                         f"{network!r} ({weights_sha256[:12]}...); fit it again with `lbi prior`.")
    return prior


#: Zoo networks on which the Gaussian prior + box was measured better than TV at the defaults
#: (benchmarks/studies/bench_input_prior.py; its weight rule is calibrated on this network): what
#: ``--regulariser auto`` picks there. The box is [0, 1] in network space: these networks take
#: uncentred [0, 1] inputs.
AUTO_GAUSSIAN = ("mnist-cnn-ae", "natural-cnn-ae")
AUTO = "auto"


def run_regulariser(spec: Any, network: str, weights_sha256: str | None,
                    input_shape: tuple[int, ...], input_prior: str | None = None,
                    noise_std: float | None = None) -> tuple[Regulariser, str]:
    """The regulariser a run uses and why (result.json's ``regulariser_rule``): ``auto`` is
    the Gaussian prior + box on the networks of AUTO_GAUSSIAN that ship it when the noise
    level is known and positive (its weight is c(s) s^2; without noise TV was better in the
    noise study), else TV; a ``gaussian`` spec gets its prior (``input_prior``, else the
    zoo's); others as named."""
    why = "given"
    if isinstance(spec, str) and spec.strip().lower() == AUTO:
        if not (noise_std is not None and noise_std > 0):
            spec, why = "tv", "auto: TV (no positive noise level: the learned prior's weight " \
                              "needs one)"
        elif network in AUTO_GAUSSIAN and has_zoo_input_prior(network):
            spec, why = "gaussian+box", ("auto: the network ships a learned input prior, "
                                         "measured better than TV (benchmarks/RESULTS.md)")
        else:
            spec, why = "tv", "auto: TV (no measured learned input prior for this network)"
    if regulariser_name(spec) != "gaussian":
        return make_regulariser(spec), why
    prior = resolve_input_prior(input_prior, network, weights_sha256, input_shape)
    return gaussian_regulariser(spec, prior), why


def gaussian_regulariser(spec: Any, prior: LowRankGaussian) -> GaussianPrior:
    """``make_regulariser`` for a ``gaussian`` spec ("gaussian+box", a dict) with its prior."""
    from lbi_engine.regularisers import parse_spec

    params = parse_spec(spec)
    if regulariser_name(spec) != "gaussian":
        raise InputError(f"regulariser {spec!r} is not the Gaussian input prior.")
    reg = make_regulariser({**params, "prior": prior})
    assert isinstance(reg, GaussianPrior)
    return reg
