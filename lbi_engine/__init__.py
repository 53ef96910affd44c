"""lbi_engine: lifted Bregman inversion of pre-trained neural networks (no Qt here, ever).

Recovers the input of a network from a (noisy) output with a convergent regularisation. The
library behind the ``lbi`` command and the ``lbi-gui`` window; importing it is cheap:
submodules (and torch) are imported on first use.

    import lbi_engine as lbi
    result = lbi.solve(lbi.InversionRequest(network="mnist-cnn-ae", index=0), alpha="auto")
    result.x, result.alpha, result.method_run, result.psnr, result.history

Public names:

- running a request: ``InversionRequest`` (the run record: network, data, noise, prior,
  method, stopping), ``solve`` (a request or a problem -> ``SolveResult``), ``prepare``
  (load what a request names and build its problem) and ``run_to_end`` (prepare and run a
  request, returning every record); ``RunMetrics`` (a run's final numbers, as
  result.json holds them);
- building a problem by hand: ``load_network`` (a zoo name or a model file), ``LiftedNetwork``,
  ``InversionProblem``, ``make_regulariser``, ``make_activation``, ``StopRule``,
  ``CancelToken``; the methods themselves are generators in ``lbi_engine.solvers``.

help() on each name describes it and its fields; the documentation (docs/index.md, built by
``sphinx-build docs``) has tutorials and the API reference.
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
    "RunMetrics": "lbi_engine.results.run_metrics",  # torch-free
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
