"""Make a library's deprecation notice count against the lbi code that triggered it.

Libraries warn with ``stacklevel=1`` or ``2`` (torch: ``torch/jit/_script.py``), so a
deprecated call made by lbi_engine is attributed to the library and pyproject's
``filterwarnings = error::FutureWarning:lbi_(engine|gui)`` would never see it. For the test
session, :func:`install` wraps :func:`warnings.warn`: a DeprecationWarning, PendingDeprecation-
Warning or FutureWarning raised inside installed libraries or the standard library is attributed
to the first caller outside them. If that caller is lbi's own code the filter turns it into an
error; if it is a test (a fixture built with a deprecated API on purpose) it stays a warning.
Filters that lbi code sets itself (``catch_warnings`` + ``ignore``) still apply as before.
"""

from __future__ import annotations

import sys
import sysconfig
import warnings
from types import FrameType
from typing import Any

_DEPRECATIONS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)
_LIBRARY_DIRS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib",
                                                          "platlib")})
_OWN = ("lbi_engine", "lbi_gui")
_real_warn = warnings.warn


def _is_library(frame: FrameType) -> bool:
    name = frame.f_globals.get("__name__", "")
    if name.split(".")[0] in _OWN:
        return False
    filename = frame.f_code.co_filename
    return filename.startswith(_LIBRARY_DIRS) or filename.startswith("<frozen ")


def attributed_warn(message: Any, category: type[Warning] | None = None, stacklevel: int = 1,
                    source: Any = None, **kwargs: Any) -> None:
    """:func:`warnings.warn`, with deprecations moved to the first caller outside libraries."""
    cls = category or (type(message) if isinstance(message, Warning) else UserWarning)
    if issubclass(cls, _DEPRECATIONS):
        try:
            frame: FrameType | None = sys._getframe(max(stacklevel, 1))
        except ValueError:  # a stacklevel beyond the stack: leave it to warnings
            frame = None
        level = max(stacklevel, 1)
        while frame is not None and _is_library(frame):
            frame, level = frame.f_back, level + 1
        if frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in _OWN:
            stacklevel = level
    _real_warn(message, category, stacklevel + 1, source, **kwargs)


def install() -> None:
    warnings.warn = attributed_warn  # type: ignore[assignment]
