"""Moved to :mod:`lbi_gui.model.session`; this alias keeps old imports working."""
import sys

from lbi_gui.model import session as _m

sys.modules[__name__] = _m
