"""Old import path of :mod:`lbi_engine.results.folder_lock`, its home since the restructure.

``lbi_engine.folder_lock`` is the same module object as ``lbi_engine.results.folder_lock``, so
attributes, private names and monkeypatching behave exactly as before.
"""

import sys
from typing import TYPE_CHECKING

from lbi_engine.results import folder_lock as _home

if TYPE_CHECKING:  # the type checker cannot follow the sys.modules swap: show it the names
    from lbi_engine.results.folder_lock import *  # noqa: F403

sys.modules[__name__] = _home
