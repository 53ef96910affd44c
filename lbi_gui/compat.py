"""Old import path of :mod:`lbi_engine.models.zoo_data` (the CLI uses the same matching)."""

import sys

from lbi_engine.models import zoo_data as _home

sys.modules[__name__] = _home
