"""Old import path of :mod:`lbi_engine.models.network`, its home since the restructure.

``lbi_engine.network`` is the same module object as ``lbi_engine.models.network``, so
attributes, private names and monkeypatching behave exactly as before.
"""

import sys

from lbi_engine.models import network as _home

sys.modules[__name__] = _home
