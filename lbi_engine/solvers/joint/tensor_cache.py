"""A cache keyed on tensor identity that forgets an entry when its tensor is freed.

``weakref.WeakKeyDictionary`` cannot hold tensors: on a hash match it compares keys with
``==``, which for tensors is elementwise (and ambiguous as a bool).
"""

from __future__ import annotations

import weakref
from typing import Generic, TypeVar

from torch import Tensor

V = TypeVar("V")


class TensorKeyed(Generic[V]):
    """``cache.get(t)`` / ``cache.put(t, value)`` by ``id(t)``, dropped when ``t`` is freed."""

    def __init__(self) -> None:
        self._data: dict[int, tuple[weakref.ref[Tensor], V]] = {}

    def get(self, tensor: Tensor) -> V | None:
        kept = self._data.get(id(tensor))
        if kept is None or kept[0]() is not tensor:
            return None
        return kept[1]

    def put(self, tensor: Tensor, value: V) -> None:
        key = id(tensor)
        fresh = key not in self._data or self._data[key][0]() is not tensor
        self._data[key] = (weakref.ref(tensor), value)
        if fresh:
            weakref.finalize(tensor, self._forget, key, weakref.ref(tensor))

    def _forget(self, key: int, ref: weakref.ref[Tensor]) -> None:
        kept = self._data.get(key)
        if kept is not None and kept[0]() is None:
            del self._data[key]

    def __len__(self) -> int:
        return len(self._data)
