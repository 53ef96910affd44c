"""The one place where the GUI imports the numerical engine (and therefore torch).

Why a bridge: importing ``lbi_engine.api`` pulls in torch (3–4 s). The window must be on
screen first, so nothing in ``lbi_gui`` imports the engine at module level; the worker thread
calls :func:`load_engine` once, after the window is shown. Tests may replace
:data:`ENGINE_FACTORY` with a small fake to exercise the GUI without the real solvers.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any


def _real_engine() -> SimpleNamespace:
    """Import the engine modules the GUI uses and return them as one namespace."""
    import torch

    from lbi_engine import api, data, zoo
    from lbi_engine.solvers.base import CancelToken

    return SimpleNamespace(
        torch=torch,
        api=api,
        InversionRequest=api.InversionRequest,
        FORMAT_VERSION=api.FORMAT_VERSION,
        prepare=api.prepare,
        iterate=api.iterate,
        final_metrics=api.final_metrics,
        CancelToken=CancelToken,
        list_zoo=zoo.list_zoo,
        list_datasets=data.list_datasets,
        get_sample=data.get_sample,
        list_splits=data.list_splits,
        dataset_size=data.dataset_size,
        cuda_available=torch.cuda.is_available,
        set_threads=torch.set_num_threads,
    )


#: Replaced by tests that run the GUI against a fake engine.
ENGINE_FACTORY: Callable[[], Any] = _real_engine
_cache: dict[Callable[[], Any], Any] = {}


def load_engine() -> Any:
    """The engine namespace, imported once per process (cheap after the first call)."""
    factory = ENGINE_FACTORY
    if factory not in _cache:
        _cache[factory] = factory()
    return _cache[factory]


def engine_loaded() -> bool:
    """True once :func:`load_engine` has run (the GUI thread may then call the engine)."""
    return ENGINE_FACTORY in _cache
