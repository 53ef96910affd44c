"""Alias: the user-file readers moved to lbi_engine/data/ (files.py: numpy; tensors.py: torch)."""
import sys

from lbi_engine.data import tensors as _m

sys.modules[__name__] = _m
