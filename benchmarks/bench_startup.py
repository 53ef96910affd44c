"""Start-up of the window, timed as a person sees it (issue #20):

launch → window shown (with the sample's ground truth on screen?) → Run enabled → engine
ready → first curve drawn, for ``lbi-gui --run`` at the defaults (the run is requested at
launch, so it is queued while the engine starts and begins by itself).

``python -m benchmarks.bench_startup [--repeat N] [--write]`` launches the real application
N times (default 3) in fresh processes on Qt's ``offscreen`` platform unless
``QT_QPA_PLATFORM`` is set (``xcb`` under Xvfb for a real window system), prints one line per
launch and the medians, and with ``--write`` puts them into ``benchmarks/RESULTS.md`` between
its own markers (the rest of the file is left as it is). The solver backend is the app's
default unless ``LBI_ENGINE_BACKEND`` is set. ``--child`` is the timed process itself.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
BEGIN, END = "<!-- startup:begin -->", "<!-- startup:end -->"
EVENTS = ("window", "engine_ready", "first_curve")


def _child() -> None:
    """The application with hooks that print when each event happens (wall clock)."""
    from PySide6 import QtCore

    import lbi_gui.main_window as mw

    marks: dict[str, Any] = {}
    original_show = mw.MainWindow.showEvent

    def report(window: Any) -> None:
        print(json.dumps(marks), flush=True)
        window.controller.stop()
        QtCore.QTimer.singleShot(0, window.close)  # the last window: the app quits cleanly

    def shown(self: Any, event: Any) -> None:
        original_show(self, event)
        if "window" in marks:
            return

        def painted() -> None:
            marks["window"] = time.time()
            marks["truth_at_window"] = self.image_grid.truth is not None
            marks["run_enabled_at_window"] = self.actions_.run.isEnabled()

        QtCore.QTimer.singleShot(0, painted)
        self.controller.booted.connect(lambda _info: marks.setdefault("engine_ready",
                                                                      time.time()))

        def drew(_progress: Any) -> None:
            if "first_curve" not in marks and len(self.controller.curves):
                marks["first_curve"] = time.time()
                QtCore.QTimer.singleShot(0, lambda: report(self))

        self.controller.view_update.connect(drew)
        QtCore.QTimer.singleShot(120_000, lambda: report(self))

    mw.MainWindow.showEvent = shown
    from lbi_gui.app import main

    main(["--run", "--no-restore"])


def launch(timeout: float = 180.0) -> dict[str, Any]:
    env = dict(os.environ)
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "benchmarks.bench_startup", "--child"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"the window printed no timings (exit {proc.returncode}):\n"
                           + proc.stderr[-2000:])
    marks = json.loads(lines[-1])
    out = {k: (marks[k] - start if k in marks else None) for k in EVENTS}
    out["truth_at_window"] = marks.get("truth_at_window")
    out["run_enabled_at_window"] = marks.get("run_enabled_at_window")
    return out


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f} s"


def table(rows: list[dict[str, Any]]) -> str:
    from lbi_gui.settings import engine_backend

    platform = os.environ.get("QT_QPA_PLATFORM", "offscreen")
    lines = ["## Start-up of the window (issue #20)", "",
             f"`python -m benchmarks.bench_startup --repeat {len(rows)} --write` on "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; Qt platform {platform}, "
             f"solver backend {engine_backend()}, `lbi-gui --run` at the defaults (the run is "
             "requested at launch: queued while the engine starts). Seconds after the process "
             "was started; a shared 2-core machine, so read the medians, not single launches.",
             "", "| launch | window shown | engine ready | first curve | truth on screen when "
             "the window shows | Run enabled then |", "|---|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        lines.append(f"| {i} | {_fmt(r['window'])} | {_fmt(r['engine_ready'])} | "
                     f"{_fmt(r['first_curve'])} | {r['truth_at_window']} | "
                     f"{r['run_enabled_at_window']} |")
    med = {k: statistics.median([r[k] for r in rows if r[k] is not None] or [float("nan")])
           for k in EVENTS}
    lines.append(f"| median | {_fmt(med['window'])} | {_fmt(med['engine_ready'])} | "
                 f"{_fmt(med['first_curve'])} | | |")
    return "\n".join(lines)


def write(section: str) -> None:
    text = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else "# Benchmark results\n"
    block = f"{BEGIN}\n{section}\n{END}"
    if BEGIN in text and END in text:
        head, _sep, rest = text.partition(BEGIN)
        _old, _sep, tail = rest.partition(END)
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    tmp = RESULTS.with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(RESULTS)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_startup")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child()
        return 0
    rows = []
    for i in range(args.repeat):
        row = launch()
        rows.append(row)
        print(f"launch {i + 1}: " + ", ".join(f"{k} {_fmt(row[k])}" for k in EVENTS)
              + f", truth at window {row['truth_at_window']}, "
                f"Run enabled at window {row['run_enabled_at_window']}", flush=True)
    section = table(rows)
    print(section)
    if args.write:
        write(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
