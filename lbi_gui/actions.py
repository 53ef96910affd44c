"""Old import path of :mod:`lbi_gui.window.actions` (moved into lbi_gui/window/)."""

import sys

from lbi_gui.window import actions as _home

sys.modules[__name__] = _home
