"""Old import path of :mod:`lbi_engine.results.exports`, its home since the restructure.

``lbi_engine.exports`` is the same module object as ``lbi_engine.results.exports``, so
attributes, private names and monkeypatching behave exactly as before.
"""

import sys

from lbi_engine.results import exports as _home

sys.modules[__name__] = _home
