"""What the GUI costs — solver throughput with the window streaming iterates against
headless, event-loop latency during a run, and the time until the window appears.

Each measurement runs the real application (``lbi_gui``) in a subprocess
(``benchmarks/suite/_gui_probe.py``) on Qt's ``offscreen`` platform unless ``QT_QPA_PLATFORM`` is
set (e.g. ``xcb`` under Xvfb, which also exercises a real window system). The figures with
targets use the app's default solver backend (``lbi_gui.settings.DEFAULT_ENGINE_BACKEND``);
one more row measures the other backend for comparison.
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

ROOT = Path(__file__).resolve().parents[2]
THROUGHPUT = 0.9
LATENCY_P99_MS = 50.0
STARTUP_S = 3.0


def _probe(*args: str, timeout: float, backend: str) -> tuple[dict, float]:
    env = dict(os.environ)
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    env["LBI_ENGINE_BACKEND"] = backend
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "benchmarks.suite._gui_probe", *args], cwd=ROOT,
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
        import lbi_gui.window.main_window  # noqa: F401 - only checks that the GUI exists
    except ImportError as exc:
        return Section("gui", "5. GUI overhead", skipped=f"lbi_gui is not importable ({exc})")
    from lbi_gui.settings import DEFAULT_ENGINE_BACKEND, ENGINE_BACKENDS

    default = DEFAULT_ENGINE_BACKEND
    other = next(b for b in ENGINE_BACKENDS if b != default)
    section = Section("gui", "5. GUI overhead")
    startups = []
    for _ in range(2 if quick else 3):
        out, start = _probe("startup", timeout=120, backend=default)
        startups.append(out["shown"] - start)
    shown = statistics.median(startups)
    section.add(Figure("window shown after launch (process start to first shown event)",
                       shown, "s", target=f"<= {STARTUP_S:g} s", passed=check(shown, STARTUP_S),
                       note=f"{default} backend; runs: " + ", ".join(f"{s:.2f}" for s in startups)
                       + " s"))
    iterations = 300 if quick else 1500  # the app's default max_iter
    rounds = 1 if quick else 3
    runs = {}
    for backend in (default, other):
        out, _ = _probe("run", str(iterations), str(rounds), timeout=900, backend=backend)
        runs[backend] = out
        ratio = out["headless_wall"] / out["gui_wall"]
        is_default = backend == default
        section.add(Figure(
            f"solver throughput with the window streaming / headless ({backend} backend"
            + (", the app default)" if is_default else ", for comparison)"),
            out["iterations"] / out["gui_wall"], "it/s", out["iterations"] / out["headless_wall"],
            "it/s headless", ratio, f">= {THROUGHPUT:g}" if is_default else "",
            check(ratio, THROUGHPUT, below=False) if is_default else None,
            f"app default problem (CNN, joint), {out['rounds']} x {iterations} iterations, each "
            "GUI run followed by a headless one; report every "
            f"10, 1 solver thread; solver-only time GUI {out['gui_solver']:.2f} s / headless "
            f"{out['headless_solver']:.2f} s; CPU of the GUI process "
            f"{out['gui_process_cpu'] / out['gui_wall']:.0%} of a core"
            + (" (solver thread included)" if backend == "thread" else "")
            + f"; torch imported in the GUI process: {out.get('torch_in_gui')}"))
        late = [v * 1e3 for v in out["lateness"]]
        p99 = _percentile(late, 0.99)
        section.add(Figure(f"event-loop latency during the run, p99 ({backend} backend)", p99,
                           "ms", target=f"< {LATENCY_P99_MS:g} ms" if is_default else "",
                           passed=check(p99, LATENCY_P99_MS) if is_default else None,
                           note=f"{len(late)} ticks of a 10 ms timer; median "
                           f"{_percentile(late, 0.5):.1f} ms, max {max(late, default=0):.1f} ms"))
    section.data.update(startups=startups, run=runs[default], runs=runs)
    section.note(f"Qt platform: {os.environ.get('QT_QPA_PLATFORM', 'offscreen')}. Latency = "
                 "how much later than its 10 ms interval a timer on the GUI thread fires "
                 "while the solver runs (process backend: in a child process; thread backend: "
                 "on a thread of the GUI process).")
    return section
