"""The current selection: which network, sample, method, noise, … the window shows.

The parameters themselves are an opaque mapping (the request the engine will get: its schema
belongs to :mod:`lbi_gui.params` and the engine's request); this object only keeps the
current one, says which keys changed, and names the parts the window talks about.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lbi_gui.model.events import Events

#: Keys that together say which sample is inverted.
SAMPLE_KEYS = ("dataset", "split", "index", "image", "truth", "data")


def same_sample(a: Mapping[str, Any], b: Mapping[str, Any], *, noise: bool = False) -> bool:
    """True when two requests invert the same network on the same sample (and, with
    ``noise``, the same noise draw): a run's result can then be compared with the other's
    ground truth and decoder output."""
    keys = ("network", *SAMPLE_KEYS) + (("noise_std", "seed") if noise else ())
    return all(a.get(k) == b.get(k) for k in keys)


def sample_label(request: Mapping[str, Any]) -> str:
    """The sample in a few words: a file's name, measured data, or dataset/split/index."""
    for key, prefix in (("image", ""), ("truth", ""), ("data", "y: ")):
        if request.get(key):
            return prefix + str(request[key]).replace("\\", "/").rsplit("/", 1)[-1]
    return f"{request.get('dataset')}/{request.get('split')}/{request.get('index')}"


class Selection:
    """The current request. Event: ``changed(old, new, keys)`` after every real change."""

    def __init__(self, request: Mapping[str, Any] | None = None) -> None:
        self._request: dict[str, Any] = dict(request or {})
        self.events = Events("changed")

    @property
    def request(self) -> dict[str, Any]:
        """The current request itself (callers may read it; change it with :meth:`replace` or
        :meth:`update`, which tell the observers)."""
        return self._request

    def replace(self, request: Mapping[str, Any]) -> set[str]:
        """Replace the request; returns (and announces) the keys whose value changed."""
        old, new = self._request, dict(request)
        keys = {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
        self._request = new
        if keys:
            self.events.changed.emit(dict(old), dict(new), keys)
        return keys

    def update(self, changes: Mapping[str, Any]) -> set[str]:
        return self.replace({**self._request, **changes})

    # ---- named parts ---------------------------------------------------------------------
    @property
    def network(self) -> str:
        return str(self._request.get("network") or "")

    @property
    def method(self) -> str:
        return str(self._request.get("method") or "")

    @property
    def noise_std(self) -> float | None:
        v = self._request.get("noise_std")
        return None if v is None else float(v)

    @property
    def sample(self) -> dict[str, Any]:
        return {k: self._request.get(k) for k in SAMPLE_KEYS}

    @property
    def sample_label(self) -> str:
        return sample_label(self._request)
