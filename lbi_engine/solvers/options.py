"""Alias: the options live in lbi_engine/solver_settings.py (torch-free)."""
import sys
from typing import TYPE_CHECKING

from lbi_engine import solver_settings as _m

if TYPE_CHECKING:  # the type checker cannot follow the sys.modules swap: show it the names
    from lbi_engine.solver_settings import *  # noqa: F403

sys.modules[__name__] = _m
