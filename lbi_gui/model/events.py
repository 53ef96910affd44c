"""A minimal evented-model helper: named events with plain-callback subscribers.

Why hand-written instead of Qt signals: :mod:`lbi_gui.model` must work (and be tested)
without Qt, as napari's ``components`` do with their EventedModel. The window layer bridges
these events to Qt signals (:mod:`lbi_gui.model_bridge`) for widgets that want queued or
cross-thread delivery; everything here is called synchronously, in the caller's thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

Callback = Callable[..., Any]


class EventEmitter:
    """Callbacks called in connection order with the event's arguments."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._callbacks: list[Callback] = []

    def connect(self, callback: Callback) -> Callback:
        """Subscribe ``callback`` (once: connecting it again does nothing); returns it."""
        if callback not in self._callbacks:
            self._callbacks.append(callback)
        return callback

    def disconnect(self, callback: Callback) -> None:
        """Unsubscribe ``callback``; one that is not connected is ignored."""
        if callback in self._callbacks:
            self._callbacks.remove(callback)

    def emit(self, *args: Any) -> None:
        # a copy: a callback may disconnect itself (or others) while the event runs
        for callback in list(self._callbacks):
            callback(*args)

    def __len__(self) -> int:
        return len(self._callbacks)

    def __repr__(self) -> str:
        return f"<EventEmitter {self.name!r}: {len(self._callbacks)} subscriber(s)>"


class Events:
    """A group of named emitters: ``Events("added", "removed").added.connect(f)``."""

    def __init__(self, *names: str) -> None:
        self._names = names
        for name in names:
            setattr(self, name, EventEmitter(name))

    def __iter__(self) -> Iterator[EventEmitter]:
        return (getattr(self, n) for n in self._names)

    def __getattr__(self, name: str) -> EventEmitter:  # for the type checker; real ones are set
        raise AttributeError(f"no event {name!r}; these exist: {', '.join(self._names)}")
