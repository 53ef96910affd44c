"""What the window shows besides the request and the runs, one event per field.

Why a model: the window's collaborators (run control, files, data inputs, the actions'
states) each draw a part of this state and change another; they meet here instead of in the
window. It is an evented model in napari's sense, in small: assigning a field to a value that
differs from the one it holds calls ``events.<field>``'s subscribers with the new value.

The prepared problem's type is a parameter (the window's is the engine's ``PreparedInfo``
message, ``ViewState[PreparedInfo]``): the engine bridge imports this package, so this
package does not import it back.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Generic, TypeVar

from lbi_gui.model.events import Events
from lbi_gui.model.runs import RunResult


def _differs(old: object, new: object) -> bool:
    """True unless ``old`` and ``new`` are one object or plainly equal (values holding
    arrays, whose ``==`` has no truth value, count as different unless identical)."""
    if old is new:
        return False
    try:
        return bool(old != new)
    except (ValueError, TypeError):
        return True


class EventedModel:
    """A dataclass whose every field has an event in ``events``, emitted on a real change."""

    events: Events

    def __post_init__(self) -> None:
        object.__setattr__(self, "events", Events(*(f.name for f in fields(self))))  # type: ignore[arg-type]

    def __setattr__(self, name: str, value: Any) -> None:
        old = getattr(self, name, None)
        object.__setattr__(self, name, value)
        events = self.__dict__.get("events")
        if events is not None and _differs(old, value):
            getattr(events, name).emit(value)


#: The prepared problem's type.
InfoT = TypeVar("InfoT")


@dataclass(eq=False)
class ViewState(EventedModel, Generic[InfoT]):
    """The window's view state. Events: ``events.<field>(new_value)``."""

    #: The prepared problem on screen (None before the first prepare).
    info: InfoT | None = None
    #: The last request that prepared fine (what a failed one goes back to).
    good_request: dict[str, Any] | None = None
    #: The finished run whose iterate and curves are on screen.
    shown_result: RunResult | None = None
    #: Run as soon as the engine is ready (a run asked for while it loads).
    autorun: bool = False
    #: A session was just opened: the next prepare keeps its restored iterate.
    restoring: bool = False
    #: The engine could not start: Run stays disabled.
    boot_failed: bool = False
    #: "Run all i/n: method" while a Run all is going ("" otherwise).
    queue_text: str = ""
