"""Old import path of :mod:`lbi_engine.results.folder_lock`, its home since the restructure.

``lbi_engine.folder_lock`` is the same module object as ``lbi_engine.results.folder_lock``, so
attributes, private names and monkeypatching behave exactly as before.
"""

import sys

from lbi_engine.results import folder_lock as _home

sys.modules[__name__] = _home
