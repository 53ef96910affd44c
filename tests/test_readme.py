"""The README's Python examples run as written and print what the README says they print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def _blocks() -> tuple[str, list[str]]:
    text = README.read_text(encoding="utf-8")
    return text, re.findall(r"```python\n(.*?)```", text, flags=re.S)


def _run(code: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()


def test_readme_defaults_example_prints_what_the_readme_quotes() -> None:
    text, blocks = _blocks()
    example = next(b for b in blocks if "lbi.solve(request" in b)
    quoted = re.search(r"prints `(alpha .*?)`", text, flags=re.S)
    assert quoted
    line = _run(example)[-1]
    want = " ".join(quoted.group(1).split())
    # α, rule, method and stop reason exactly; PSNRs and the iteration count to the
    # precision float32 on another CPU reproduces (the path's kernels are not bit-stable).
    pattern = (r"alpha ([\d.]+) \(([\w-]+)\), method (\w+), PSNR ([\d.]+) dB "
               r"\(decoder ([\d.]+) dB\), (\w+) after (\d+) iterations")
    got, exp = re.fullmatch(pattern, line), re.fullmatch(pattern, want)
    assert got and exp, (line, want)
    assert got.group(2, 3, 6) == exp.group(2, 3, 6)
    assert abs(float(got.group(1)) / float(exp.group(1)) - 1) < 0.05
    assert abs(float(got.group(4)) - float(exp.group(4))) < 0.2
    assert abs(float(got.group(5)) - float(exp.group(5))) < 0.01
    assert abs(int(got.group(7)) - int(exp.group(7))) <= 100


def test_readme_solver_example_runs_and_matches_its_text() -> None:
    text, blocks = _blocks()
    example = next(b for b in blocks if "solve(problem" in b)
    quoted = re.search(r"prints the objective falling from ([\d.]+) to ([\d.]+) and the PSNR "
                       r"rising from ([\d.]+) dB to ([\d.]+) dB,\s+stopping by `(\w+)` after "
                       r"(\d+) iterations", text)
    assert quoted
    lines = _run(example)
    first = re.search(r"objective ([\d.]+) PSNR ([\d.]+) dB", lines[0])
    last = re.search(r"^(\d+) objective ([\d.]+) PSNR ([\d.]+) dB (\w+)$", lines[-1].strip())
    assert first and last
    assert abs(float(first.group(1)) - float(quoted.group(1))) < 0.01
    assert abs(float(first.group(2)) - float(quoted.group(3))) < 0.05
    # the minimum of a convex problem: the objective is reproducible, the PSNR nearly so
    assert abs(float(last.group(2)) - float(quoted.group(2))) < 0.005
    assert abs(float(last.group(3)) - float(quoted.group(4))) < 0.2
    assert last.group(4) == quoted.group(5)  # it stops by itself
    assert abs(int(last.group(1)) - int(quoted.group(6))) <= 150
