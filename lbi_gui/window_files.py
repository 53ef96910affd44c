"""Old import path of :mod:`lbi_gui.window.files` (moved into lbi_gui/window/)."""

import sys

from lbi_gui.window import files as _home

sys.modules[__name__] = _home
