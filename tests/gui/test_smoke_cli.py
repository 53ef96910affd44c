"""`lbi-gui --smoke-test`: the check a desktop bundle runs after it is built."""

from __future__ import annotations

import os
import re
import subprocess
import sys


def test_smoke_test_runs_one_inversion_and_exits_zero() -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run(
        [sys.executable, "-m", "lbi_gui", "--smoke-test", "--max-iter", "50"],
        capture_output=True, text=True, timeout=240, env=env,
    )
    assert done.returncode == 0, done.stderr
    match = re.search(r"smoke test OK: (\d+) iterations, PSNR ([\d.]+) dB", done.stdout)
    assert match, done.stdout
    # alpha "auto" (the default) walks a path of solves, each capped at --max-iter; the
    # iteration count goes on across them
    assert int(match.group(1)) >= 50
    assert float(match.group(2)) > 10.0  # a digit, not zeros (about 6 dB)
