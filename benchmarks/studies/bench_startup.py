"""How long until a person sees the window, Run enabled and the first curve?

Start-up of the window, timed as a person sees it:

launch → window shown (with the sample's ground truth on screen?) → Run enabled → engine
ready → first curve drawn, for ``lbi-gui --run`` at the defaults (the run is requested at
launch, so it is queued while the engine starts and begins by itself).

``python -m benchmarks.studies.bench_startup [--repeat N] [--write]`` launches the real application
N times (default 3) in fresh processes on Qt's ``offscreen`` platform unless
``QT_QPA_PLATFORM`` is set (``xcb`` under Xvfb for a real window system), prints one line per
launch and the medians, and with ``--write`` puts them into ``benchmarks/RESULTS.md`` between
its own markers (the rest of the file is left as it is). The solver backend is the app's
default unless ``LBI_ENGINE_BACKEND`` is set. ``--child`` is the timed process itself.
Each launch also records the 1-minute load average before it and the CPU seconds the window's
process and the engine's process had used by the first curve (load-independent).
``--compare DIR`` launches another checkout's own ``--child`` alternately with this one's,
for a before/after under the same conditions.
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

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
BEGIN, END = "<!-- startup:begin -->", "<!-- startup:end -->"
EVENTS = ("window", "engine_ready", "first_curve")


def _child(network: str | None = None) -> None:
    """The application with a hook that prints when each event happens (wall clock).

    The hook goes in through ``lbi_gui.app.WINDOW_HOOKS``, so the app starts exactly as
    ``lbi-gui`` does (the engine child first, then Qt and the window): nothing here imports
    Qt or the window before :func:`lbi_gui.app.main` does.
    """
    import lbi_gui.app as app

    marks: dict[str, Any] = {}

    def hook(window: Any) -> None:
        from PySide6 import QtCore

        def report() -> None:
            print(json.dumps(marks), flush=True)
            window.controller.stop()
            # the measured run is not the user's: quit without the "discard runs?" question
            window.files.may_discard = lambda _action: True
            QtCore.QTimer.singleShot(0, window.close)  # the last window: the app quits

        def painted() -> None:  # the first turn of the event loop after show()
            marks["window"] = time.time()
            marks["window_visible"] = window.isVisible()
            marks["truth_at_window"] = window.image_grid.truth is not None
            marks["run_enabled_at_window"] = window.actions_.run.isEnabled()

        def drew(_progress: Any) -> None:
            if "first_curve" not in marks and len(window.controller.curves):
                marks["first_curve"] = time.time()
                marks["first_curve_points"] = len(window.controller.curves)
                marks["gui_cpu"] = time.process_time()
                host = sys.modules.get("lbi_gui.engine.host")
                pid = host.engine_host().pid if host is not None else None
                marks["engine_cpu"] = _cpu_seconds(pid)
                QtCore.QTimer.singleShot(0, report)

        QtCore.QTimer.singleShot(0, painted)
        window.controller.booted.connect(lambda _info: marks.setdefault("engine_ready",
                                                                        time.time()))
        window.controller.view_update.connect(drew)
        QtCore.QTimer.singleShot(120_000, report)

    app.WINDOW_HOOKS.append(hook)
    app.main(["--run", "--no-restore", *(["--network", network] if network else [])])


def _cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of a live process (Linux /proc), else None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, TypeError):
        return None


def launch(root: Path = ROOT, timeout: float = 180.0,
           network: str | None = None) -> dict[str, Any]:
    """One launch of the application in ``root`` (this checkout, or another one's own
    ``--child`` for a comparison); seconds after the process was started."""
    env = dict(os.environ)
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    load = os.getloadavg()[0]
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "benchmarks.studies.bench_startup", "--child",
                           *(["--network", network] if network else [])],
                          cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"the window printed no timings (exit {proc.returncode}):\n"
                           + proc.stderr[-2000:])
    marks = json.loads(lines[-1])
    out = {k: (marks[k] - start if k in marks else None) for k in EVENTS}
    for key in ("truth_at_window", "run_enabled_at_window", "gui_cpu", "engine_cpu"):
        out[key] = marks.get(key)
    out["load"] = load
    return out


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f} s"


def _median(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def table(rows: list[dict[str, Any]], base: list[dict[str, Any]] | None = None,
          base_name: str = "", network: str | None = None) -> str:
    from lbi_gui.settings import engine_backend

    platform = os.environ.get("QT_QPA_PLATFORM", "offscreen")
    cmd = f"--repeat {len(rows)}" + (f" --network {network}" if network else
                                     f" --compare {base_name}" if base else "")
    loads = [r["load"] for r in rows + (base or [])]
    title = f"## Start-up of the window: {network} against the default" if network else \
        "## Start-up of the window"
    lines = [title, "",
             f"`python -m benchmarks.studies.bench_startup {cmd} --write` on "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; Qt platform {platform}, "
             f"solver backend {engine_backend()}, `lbi-gui --run` at the defaults (the run is "
             "requested at launch: queued while the engine starts). Seconds after the process "
             f"was started, on {os.cpu_count()} cores shared with other work: 1-minute load "
             f"average {min(loads):.1f}–{max(loads):.1f} at the launches, so read the "
             "medians, not single launches. CPU seconds (user + system) at the first curve "
             "do not depend on the load: with the two processes on two idle cores, the first "
             "curve comes about when the larger of the two is spent (plus interpreter start).",
             "", "| launch | load | window shown | engine ready | first curve | GUI CPU | "
             "engine CPU | truth at window | Run enabled then |",
             "|---|---|---|---|---|---|---|---|---|"]

    def block(label: str, group: list[dict[str, Any]]) -> None:
        for i, r in enumerate(group, 1):
            lines.append(f"| {label}{i} | {r['load']:.1f} | {_fmt(r['window'])} | "
                         f"{_fmt(r['engine_ready'])} | {_fmt(r['first_curve'])} | "
                         f"{_fmt(r.get('gui_cpu'))} | {_fmt(r.get('engine_cpu'))} | "
                         f"{r['truth_at_window']} | {r['run_enabled_at_window']} |")
        lines.append(f"| {label}median | | {_fmt(_median(group, 'window'))} | "
                     f"{_fmt(_median(group, 'engine_ready'))} | "
                     f"{_fmt(_median(group, 'first_curve'))} | "
                     f"{_fmt(_median(group, 'gui_cpu'))} | "
                     f"{_fmt(_median(group, 'engine_cpu'))} | | |")

    block("", rows)
    if base:
        block(f"{base_name} ", base)
        lines.append(f"\nRows named {base_name} are `lbi-gui --run --network {network}`, "
                     "launched alternately with the default (same conditions)." if network
                     else f"\nRows named {base_name} are the same benchmark on that "
                     "checkout, launched alternately with this one (same conditions).")
    return "\n".join(lines)


def write(section: str, network: str | None = None) -> None:
    text = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else "# Benchmark results\n"
    begin, end = (BEGIN, END) if not network else (f"<!-- startup {network}:begin -->",
                                                   f"<!-- startup {network}:end -->")
    block = f"{begin}\n{section}\n{end}"
    if begin in text and end in text:
        head, _sep, rest = text.partition(begin)
        _old, _sep, tail = rest.partition(end)
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    tmp = RESULTS.with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(RESULTS)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.studies.bench_startup")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    p.add_argument("--compare", metavar="DIR",
                   help="another checkout (e.g. `git archive <commit> | tar -x -C DIR`): "
                        "launch its own benchmark child alternately with this one's")
    p.add_argument("--network", metavar="NAME",
                   help="also launch `lbi-gui --run --network NAME`, alternately with the "
                        "default network (the natural-image network against MNIST's, say)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.network)
        return 0
    if args.network and args.compare:
        p.error("give --network or --compare, not both")
    rows: list[dict[str, Any]] = []
    base: list[dict[str, Any]] = []
    other = Path(args.compare).resolve() if args.compare else ROOT if args.network else None
    for i in range(args.repeat):
        for root, group, name in ((ROOT, rows, "this"), (other, base, "compare")):
            if root is None:
                continue
            row = launch(root, network=args.network if group is base else None)
            group.append(row)
            print(f"{name} launch {i + 1} (load {row['load']:.1f}): "
                  + ", ".join(f"{k} {_fmt(row[k])}" for k in EVENTS)
                  + f", GUI CPU {_fmt(row.get('gui_cpu'))}, engine CPU "
                    f"{_fmt(row.get('engine_cpu'))}", flush=True)
    section = table(rows, base, args.network or (other.name if other else ""), args.network)
    print(section)
    if args.write:
        write(section, args.network)
    return 0


if __name__ == "__main__":
    sys.exit(main())
