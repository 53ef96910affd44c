"""``python -m lbi_gui`` = ``lbi-gui``."""

import sys

from lbi_gui.app import main

sys.exit(main())
