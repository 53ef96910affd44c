"""The README's Python example runs as written and prints what the README says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_example_runs_and_matches_its_text() -> None:
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    example = next(b for b in blocks if "solve(problem" in b)
    done = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    first = re.search(r"objective ([\d.]+) PSNR ([\d.]+) dB", lines[0])
    last = re.search(r"objective ([\d.]+) PSNR ([\d.]+) dB", lines[-1])
    assert first and last
    # The numbers the README quotes (objective 82.2 -> 1.03, PSNR 8.1 -> 24.3 dB).
    assert abs(float(first.group(1)) - 82.2) < 0.1 and abs(float(first.group(2)) - 8.1) < 0.1
    assert abs(float(last.group(1)) - 1.03) < 0.01 and abs(float(last.group(2)) - 24.3) < 0.1
    assert lines[-1].rstrip().endswith("max_iterations")
