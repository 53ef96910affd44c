"""Old import path of :mod:`lbi_gui.window.run` (moved into lbi_gui/window/)."""

import sys

from lbi_gui.window import run as _home

sys.modules[__name__] = _home
