"""Old import path of :mod:`lbi_engine.models.cards`, its home since the restructure.

``lbi_engine.cards`` is the same module object as ``lbi_engine.models.cards``, so
attributes, private names and monkeypatching behave exactly as before.
"""

import sys
from typing import TYPE_CHECKING

from lbi_engine.models import cards as _home

if TYPE_CHECKING:  # the type checker cannot follow the sys.modules swap: show it the names
    from lbi_engine.models.cards import *  # noqa: F403

sys.modules[__name__] = _home
