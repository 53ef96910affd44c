"""Old import path of :mod:`lbi_gui.window.data` (moved into lbi_gui/window/)."""

import sys

from lbi_gui.window import data as _home

sys.modules[__name__] = _home
