"""Fit a network's feature prior and write it: what ``lbi feature-prior`` and the window's
"Fit a feature prior…" both run, so a prior fitted in either is the same file.

The stages are reported through ``stage`` (a callback taking one line of text), so a caller
can show progress: loading the network, reading the samples, fitting, writing.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lbi_engine.errors import InputError


@dataclass
class FittedPriorFiles:
    """What :func:`fit_feature_prior_files` wrote and from what."""

    tensors: Path
    card: Path
    sizes: list[int]  # each feature variable's size, x_1 .. x_{L-1}
    rank: int
    source: str  # where the samples came from, as the card records it


def prior_fit_inputs(network: str, samples: str | os.PathLike[str] | None, *,
                     input_shape: tuple[int, ...] | None = None, allow_code: bool = False
                     ) -> tuple[Any, Any, str]:
    """(bundle, clean inputs in display space, where they came from): ``samples`` (a .npy
    array or a folder of images), else a zoo network's bundled training split."""
    from lbi_engine.models.zoo import list_zoo, load_network
    from lbi_engine.priors import feature as fp

    bundle = load_network(network, input_shape=input_shape, allow_code=allow_code)
    if samples:
        inputs = fp.load_samples(samples, bundle.input_shape)
        return bundle, inputs, f"{samples} ({inputs.shape[0]} samples)"
    if network in list_zoo():
        inputs, source = fp.zoo_training_inputs(bundle)
        return bundle, inputs, source
    raise InputError("give clean sample inputs (a .npy array or a folder of images; CLI: "
                     "--samples) to fit the prior of a network outside the zoo.")


def fit_command(network: str, samples: str | os.PathLike[str] | None,
                rank: int | None) -> str:
    """The ``lbi feature-prior`` arguments that repeat a fit (the output as BASE)."""
    args = [network] + (["--samples", os.fspath(samples)] if samples else []) + ["--out", "BASE"]
    return " ".join(shlex.quote(a) for a in args + (["--rank", str(rank)] if rank else []))


def fit_feature_prior_files(network: str, out: str | os.PathLike[str], *,
                            samples: str | os.PathLike[str] | None = None,
                            input_shape: tuple[int, ...] | None = None,
                            allow_code: bool = False, rank: int | None = None,
                            overwrite: bool = False,
                            stage: Callable[[str], None] | None = None) -> FittedPriorFiles:
    """Fit the Gaussian feature prior of ``network`` on clean ``samples`` and write
    ``out``.safetensors + ``out``.json (refused before the fit when they exist and not
    ``overwrite``, or when another writer holds the same BASE)."""
    import torch

    from lbi_engine.io import safe_output_path
    from lbi_engine.priors import feature as fp
    from lbi_engine.results.folder_lock import output_folder_lock

    say = stage or (lambda _text: None)
    with output_folder_lock(out):
        for path in fp.prior_paths(out):  # refused now, not after minutes of fitting
            safe_output_path(path, overwrite)
        torch.manual_seed(0)
        say(f"loading {Path(network).name}")
        bundle, inputs, source = prior_fit_inputs(network, samples, input_shape=input_shape,
                                                  allow_code=allow_code)
        if len(bundle.encoder.layers) < 2:
            raise InputError(f"{network} has one layer: layer-wise inversion needs no feature "
                             "prior for it.")
        rank = rank or fp.DEFAULT_RANK
        say(f"fitting {len(bundle.encoder.layers) - 1} feature prior(s) on "
            f"{inputs.shape[0]} samples")
        encoder = bundle.encoder.to(dtype=torch.float64)
        fitted = fp.fit_feature_priors(encoder, bundle.preprocessing.apply(inputs.double()),
                                       rank)
        command = "lbi feature-prior " + fit_command(network, samples, rank)
        fitted.card = fp.make_card(bundle.name, bundle.sha256, source, command, fitted, rank)
        say("writing")
        tensors, card = fp.save_feature_priors(fitted, out, overwrite=overwrite)
    return FittedPriorFiles(Path(tensors), Path(card), [p.size for p in fitted.layers], rank,
                            source)
