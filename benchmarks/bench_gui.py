"""Item 5: what the GUI costs — solver throughput with the window streaming iterates against
headless, event-loop latency during a run, and the time until the window appears.

Each measurement runs the real application (``lbi_gui``) in a subprocess
(``benchmarks/_gui_probe.py``) on Qt's ``offscreen`` platform unless ``QT_QPA_PLATFORM`` is
set (e.g. ``xcb`` under Xvfb, which also exercises a real window system).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._common import Figure, Section, check

ROOT = Path(__file__).resolve().parent.parent
THROUGHPUT = 0.9
LATENCY_P99_MS = 50.0
STARTUP_S = 3.0


def _probe(*args: str, timeout: float) -> tuple[dict, float]:
    env = dict(os.environ)
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "benchmarks._gui_probe", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"GUI probe {args} printed no result (exit {proc.returncode}):\n"
                           + proc.stderr[-2000:])
    return json.loads(lines[-1]), start


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run(quick: bool = False) -> Section:
    try:
        import lbi_gui.main_window  # noqa: F401 - only checks that the GUI exists
    except ImportError as exc:
        return Section("gui", "5. GUI overhead", skipped=f"lbi_gui is not importable ({exc})")
    section = Section("gui", "5. GUI overhead")
    startups = []
    for _ in range(2 if quick else 3):
        out, start = _probe("startup", timeout=120)
        startups.append(out["shown"] - start)
    shown = statistics.median(startups)
    section.add(Figure("window shown after launch (process start to first shown event)",
                       shown, "s", target=f"<= {STARTUP_S:g} s", passed=check(shown, STARTUP_S),
                       note="runs: " + ", ".join(f"{s:.2f}" for s in startups) + " s"))
    iterations = 300 if quick else 1500  # the app's default max_iter
    out, _ = _probe("run", str(iterations), timeout=900)
    ratio = out["headless_wall"] / out["gui_wall"]
    section.add(Figure(
        "solver throughput with the window streaming / headless", out["iterations"] /
        out["gui_wall"], "it/s", out["iterations"] / out["headless_wall"], "it/s headless",
        ratio, f">= {THROUGHPUT:g}", check(ratio, THROUGHPUT, below=False),
        f"app default problem (CNN, joint), {out['iterations']} iterations, report every 10, "
        f"1 solver thread; solver-only time GUI {out['gui_solver']:.2f} s / headless "
        f"{out['headless_solver']:.2f} s"))
    late = [v * 1e3 for v in out["lateness"]]
    p99 = _percentile(late, 0.99)
    section.add(Figure("event-loop latency during the run, p99", p99, "ms",
                       target=f"< {LATENCY_P99_MS:g} ms", passed=check(p99, LATENCY_P99_MS),
                       note=f"{len(late)} ticks of a 10 ms timer; median "
                       f"{_percentile(late, 0.5):.1f} ms, max {max(late, default=0):.1f} ms"))
    section.data.update(startups=startups, run=out)
    section.note(f"Qt platform: {os.environ.get('QT_QPA_PLATFORM', 'offscreen')}. Latency = "
                 "how much later than its 10 ms interval a timer on the GUI thread fires "
                 "while the solver runs on its worker thread.")
    return section
