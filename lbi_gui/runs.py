"""Moved to :mod:`lbi_gui.model.runs`; this alias keeps old imports working."""
import sys

from lbi_gui.model import runs as _m

sys.modules[__name__] = _m
