"""The one place where the GUI imports the numerical engine (and therefore torch).

Why a bridge: importing ``lbi_engine.api`` pulls in torch (3–4 s). The window must be on
screen first, so nothing in ``lbi_gui`` imports the engine at module level; the solver (a
thread of the GUI process, or a child process) calls :func:`load_full_engine` once, after the
window is shown. Tests may replace :data:`ENGINE_FACTORY` with a small fake to exercise the GUI
without the real solvers (that fake only exists in the test's process, so it forces the thread
backend). With the process backend the GUI process never needs torch: the GUI thread's few
engine calls (dataset splits, sizes, thumbnails) are served by :func:`data_view`, which reads
the bundled datasets with the torch-free :mod:`lbi_engine.data` (numpy only).
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any


def _real_engine() -> SimpleNamespace:
    """Import the engine modules the GUI uses and return them as one namespace."""
    import torch

    from lbi_engine import api, data
    from lbi_engine.models import zoo
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


def default_factory() -> Callable[[], Any]:
    """The real engine's factory (what a child process loads)."""
    return _real_engine

_cache: dict[Callable[[], Any], Any] = {}


#: Process-backend channels open in this process; while > 0 the GUI thread uses the data view.
_data_view_users = 0


def load_full_engine() -> Any:
    """The engine namespace, imported once per process (cheap after the first call)."""
    factory = ENGINE_FACTORY
    if factory not in _cache:
        _cache[factory] = factory()
    return _cache[factory]


def load_engine() -> Any:
    """What the GUI thread may call: the full engine if this process has it, else (process
    backend) the torch-free :func:`data_view`; else the full engine is imported now."""
    if ENGINE_FACTORY in _cache or _data_view_users <= 0:
        return load_full_engine()
    return data_view()


def engine_loaded() -> bool:
    """True once the GUI thread may call :func:`load_engine` without waiting for torch."""
    return ENGINE_FACTORY in _cache or _data_view_users > 0


def hold_data_view(delta: int) -> None:
    """A process-backend channel opened (+1) or closed (-1) in this process."""
    global _data_view_users
    _data_view_users = max(0, _data_view_users + delta)


class _Pixels:
    """A numpy image that answers ``[i]``, ``.detach()``, ``.cpu()``, ``.numpy()`` like the
    tensor the full engine returns, so GUI code written for either needs no branch."""

    def __init__(self, array: Any) -> None:
        self._a = array

    def __getitem__(self, index: Any) -> _Pixels:
        return _Pixels(self._a[index])

    def detach(self) -> _Pixels:
        return self

    def cpu(self) -> _Pixels:
        return self

    def numpy(self) -> Any:
        return self._a


def _sample_pixels(dataset: str, split: str, index: int) -> _Pixels:
    """``get_sample`` for the GUI thread: the engine's own torch-free reader
    (:func:`lbi_engine.data.sample_array`), so the same checks, errors and values."""
    from lbi_engine import data

    return _Pixels(data.sample_array(dataset, split, int(index)))


def data_view() -> SimpleNamespace:
    """The dataset functions of the engine namespace, served by numpy (no torch import)."""
    from lbi_engine import data
    from lbi_engine.models import zoo

    return SimpleNamespace(list_zoo=zoo.list_zoo, list_datasets=data.list_datasets,
                           list_splits=data.list_splits, dataset_size=data.dataset_size,
                           get_sample=_sample_pixels)
