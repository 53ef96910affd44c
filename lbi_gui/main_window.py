"""Old import path of :mod:`lbi_gui.window.main_window` (moved into lbi_gui/window/)."""

import sys

from lbi_gui.window import main_window as _home

sys.modules[__name__] = _home
