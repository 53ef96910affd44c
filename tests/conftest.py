"""Suite-wide settings, applied before any test module imports torch or Qt."""

from __future__ import annotations

import os

from tests import _deprecations

# Library deprecations triggered by lbi's own code fail the test that triggered them
# (pyproject filterwarnings); those triggered by a test's own fixture code stay warnings.
_deprecations.install()

# One OpenMP thread per process: the test problems are small, and on a 2-core machine shared
# with other processes two threads made small convolutions up to 1000x slower (measured).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
# The solver runs in a thread of the test process by default (starts at once; monkeypatched
# engines are visible to it); tests/gui/engine/test_engine_process.py covers the process backend.
os.environ.setdefault("LBI_ENGINE_BACKEND", "thread")
# Windows closed by tests and scripts never ask about unsaved runs (a modal box would wait
# forever); tests of that prompt switch it on per window.
os.environ.setdefault("LBI_GUI_CONFIRM_QUIT", "0")
# Qt without a screen (CI, headless machines); a developer can override it.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
