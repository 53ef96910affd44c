"""lbi_engine: lifted Bregman inversion of pre-trained neural networks (no Qt here, ever).

Importing this package is cheap: submodules (and torch) are imported on first use.

    import lbi_engine as lbi
    result = lbi.solve(lbi.InversionRequest(network="mnist-cnn-ae", index=0), alpha="auto")
    result.x, result.alpha, result.method_run, result.psnr, result.history
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "LiftedNetwork": "lbi_engine.models.network",
    "make_activation": "lbi_engine.activations",
    "make_regulariser": "lbi_engine.regularisers",
    "InversionProblem": "lbi_engine.problem",
    "StopRule": "lbi_engine.settings.solver",  # torch-free
    "CancelToken": "lbi_engine.solvers.base",
    "solve": "lbi_engine.api",  # a request or problem -> SolveResult (the records: .solvers)
    "SolveResult": "lbi_engine.api",
    "load_network": "lbi_engine.models.zoo",
    "InversionRequest": "lbi_engine.request",  # torch-free
    "prepare": "lbi_engine.api",
    "run_to_end": "lbi_engine.api",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lbi_engine' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = ["__version__", *_LAZY]
