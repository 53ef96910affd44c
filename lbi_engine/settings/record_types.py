"""Type checks of JSON values against dataclass annotations (run records, sessions).

Why: a hand-edited or damaged record ("max_iter": "10", "alpha": null) must be refused with a
message naming the field, not fail later with a TypeError deep inside a solver.
"""

from __future__ import annotations

import numbers
import types
import typing
from typing import Any


def hint_name(hint: Any) -> str:
    """'int', 'str | None', 'tuple[int, ...] | None' rather than "<class 'int'>"."""
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def json_type_ok(value: Any, hint: Any) -> bool:
    """Whether a JSON value fits an annotation (numbers: numbers.Real/Integral, no bools)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(json_type_ok(value, a) for a in args)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if isinstance(value, bool):
        return hint is bool
    if hint is float:
        return isinstance(value, numbers.Real)
    if hint is int:
        return isinstance(value, numbers.Integral)
    if origin in (list, tuple):
        return isinstance(value, (list, tuple)) and all(json_type_ok(v, args[0]) for v in value)
    return isinstance(value, origin or hint)
