"""Make a library's deprecation notice count against the lbi code that triggered it.

Libraries warn with ``stacklevel=1`` or ``2`` (torch: ``torch/jit/_script.py``), so a
deprecated call made by lbi_engine is attributed to the library and pyproject's
``filterwarnings = error::FutureWarning:lbi_(engine|gui)`` would never see it. For the test
session, :func:`install` wraps :func:`warnings.warn`: when a library warns about a
DeprecationWarning, PendingDeprecationWarning or FutureWarning and the first caller outside
that library (and the standard library) is lbi's own code, the warning is attributed to that
lbi line, and the filter turns it into an error. A test that builds a fixture with a deprecated
API on purpose, or one library using another's deprecated API (matplotlib 3.7 calls pyparsing's
``parseString``), keeps the warning where it was. Filters that lbi code sets itself
(``catch_warnings`` + ``ignore``) still apply as before.
"""

from __future__ import annotations

import sys
import sysconfig
import warnings
from types import FrameType
from typing import Any

_DEPRECATIONS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)
_STDLIB_DIRS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")})
_SITE_DIRS = tuple({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
_OWN = ("lbi_engine", "lbi_gui")
_real_warn = warnings.warn


def _package(frame: FrameType) -> str:
    return str(frame.f_globals.get("__name__", "")).split(".")[0]


def _is_stdlib(frame: FrameType) -> bool:
    filename = frame.f_code.co_filename
    return filename.startswith("<frozen ") or (filename.startswith(_STDLIB_DIRS)
                                               and not filename.startswith(_SITE_DIRS))


def attributed_warn(message: Any, category: type[Warning] | None = None, stacklevel: int = 1,
                    source: Any = None, **kwargs: Any) -> None:
    """:func:`warnings.warn`, with deprecations moved to the first caller outside libraries."""
    cls = category or (type(message) if isinstance(message, Warning) else UserWarning)
    if issubclass(cls, _DEPRECATIONS):
        # The package whose code called warn() issued it; the first frame outside it (and
        # outside the standard library) is the code that used the deprecated API.
        frame: FrameType | None = sys._getframe(1)
        warner, level = _package(frame), 1
        if warner not in _OWN:  # lbi's own warnings stay as lbi wrote them
            while frame is not None and (_package(frame) == warner or _is_stdlib(frame)):
                frame, level = frame.f_back, level + 1
            if frame is not None and _package(frame) in _OWN:
                stacklevel = level
    _real_warn(message, category, stacklevel + 1, source, **kwargs)


def install() -> None:
    warnings.warn = attributed_warn  # type: ignore[assignment]
