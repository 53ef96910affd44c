"""PyInstaller entry script for the `lbi` command line (the same entry point as `lbi`)."""

import multiprocessing
import sys

if __name__ == "__main__":
    multiprocessing.freeze_support()
    from lbi_engine.cli import main

    sys.exit(main())
