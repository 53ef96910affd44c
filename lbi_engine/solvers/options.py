"""Alias: the options live in lbi_engine/solver_settings.py (torch-free)."""
import sys

from lbi_engine import solver_settings as _m

sys.modules[__name__] = _m
