"""The paper's experiments (``lbi reproduce``) and parameter sweeps (``lbi sweep``).

One module per experiment; each has ``run(out_dir, quick=False, overwrite=False,
progress=None) -> Report`` and writes PNG figures plus ``report.md`` with the numbers it
computed and its run time. Modules are imported on demand (no work at import time).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

#: name -> (module, function, one-line description); the order of `lbi reproduce all`.
EXPERIMENTS: dict[str, tuple[str, str, str]] = {
    "circle": ("lbi_engine.experiments.circle", "run",
               "disc through a random ReLU perceptron: Landweber vs TV (paper Sec. 5.1, Fig. 1)"),
    "mnist-perceptron": ("lbi_engine.experiments.mnist", "run_perceptron",
                         "perceptron autoencoder: 5 train + 5 val digits (Sec. 5.1, Fig. 2)"),
    "mnist-cnn": ("lbi_engine.experiments.mnist", "run_cnn",
                  "convolutional autoencoder, joint method (paper Sec. 5.2, Fig. 3)"),
    "noise": ("lbi_engine.experiments.noise_levels", "run",
              "PSNR of decoder and inversion against the noise on the code (Sec. 5.2, Fig. 4-5)"),
    "natural": ("lbi_engine.experiments.noise_levels", "run_natural",
                "the noise study on colour photograph patches (residual autoencoder)"),
    "convergence": ("lbi_engine.experiments.convergence", "run",
                    "a-priori alpha(delta): symmetric Bregman distance = O(delta) (Sec. 3.2)"),
}


def get_experiment(name: str) -> Callable[..., Any]:
    """The run function of an experiment by name."""
    from lbi_engine.errors import InputError

    if name not in EXPERIMENTS:
        raise InputError(f"unknown experiment {name!r}; choose one of {', '.join(EXPERIMENTS)}"
                         " or 'all'.")
    module, function, _ = EXPERIMENTS[name]
    return getattr(importlib.import_module(module), function)


__all__ = ["EXPERIMENTS", "get_experiment"]
