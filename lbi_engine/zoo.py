"""Old import path of :mod:`lbi_engine.models.zoo`, its home since the restructure.

``lbi_engine.zoo`` is the same module object as ``lbi_engine.models.zoo``, so
attributes, private names and monkeypatching behave exactly as before.
"""

import sys

from lbi_engine.models import zoo as _home

sys.modules[__name__] = _home
