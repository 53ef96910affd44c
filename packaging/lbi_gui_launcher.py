"""PyInstaller entry script for the lbi desktop app (the same entry point as `lbi-gui`).

A frozen app runs its entry file as ``__main__``, which would break relative imports inside
``lbi_gui/app.py``; this launcher imports the package normally and calls ``lbi_gui.app:main``,
exactly what the ``lbi-gui`` script installed by pip does.
"""

import multiprocessing
import sys

if __name__ == "__main__":
    # Needed before anything else in a frozen app in case a library spawns worker processes.
    multiprocessing.freeze_support()
    from lbi_gui.app import main

    sys.exit(main())
