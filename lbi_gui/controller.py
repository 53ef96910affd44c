"""Old import path of :mod:`lbi_gui.window.controller` (moved into lbi_gui/window/)."""

import sys

from lbi_gui.window import controller as _home

sys.modules[__name__] = _home
