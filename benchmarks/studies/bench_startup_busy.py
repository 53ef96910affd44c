"""How late is the first iterate drawn when the machine is busy?

Start-up of the window beside other CPU-bound work: when is the first iterate drawn?

    python -m benchmarks.studies.bench_startup_busy [--repeat N] [--busy K] [--write]

Launches ``lbi-gui --run`` at the defaults (the launch of :mod:`benchmarks.studies.bench_startup`:
window shown, engine ready, first curve and iterate drawn, CPU seconds of the window's and
the engine's processes) alternately on a quiet machine and with K (default 2) CPU-bound
processes running beside it (pure-Python loops, as a build on a laptop would be), N times
each (default 2). Prints one line per launch and the medians of both, and their ratio
measured in the same run; with ``--write`` writes the table to
``benchmarks/results/startup_busy.md``. Where the time goes: "engine ready" is the engine process's
start (interpreter, torch import, warm-up), "first curve" adds preparing the problem and the
first solver steps; the CPU seconds show how much of the wall time was the processes' own
work and how much waiting for a core.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time
from typing import Any

from benchmarks import RESULTS_DIR
from benchmarks.studies.bench_startup import EVENTS, launch

OUT = RESULTS_DIR / "startup_busy.md"
KEYS = (*EVENTS, "gui_cpu", "engine_cpu")


def _burn(stop: Any) -> None:
    """A CPU-bound process: arithmetic until told to stop."""
    x = 0
    while not stop.is_set():
        for i in range(100_000):
            x = (x * 31 + i) % 1_000_003


def _busy_launch(k: int) -> dict[str, Any]:
    stop = multiprocessing.Event()
    burners = [multiprocessing.Process(target=_burn, args=(stop,), daemon=True)
               for _ in range(k)]
    for p in burners:
        p.start()
    time.sleep(2.0)  # the load is there before the person launches the window
    try:
        return launch(timeout=300.0)
    finally:
        stop.set()
        for p in burners:
            p.join(10)


def _median(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--busy", type=int, default=2)
    p.add_argument("--write", action="store_true")
    args = p.parse_args(argv)
    quiet: list[dict[str, Any]] = []
    busy: list[dict[str, Any]] = []
    for i in range(args.repeat):
        for name, rows, run in (("quiet", quiet, lambda: launch(timeout=300.0)),
                                (f"busy×{args.busy}", busy, lambda: _busy_launch(args.busy))):
            row = run()
            rows.append(row)
            print(f"{name} {i + 1} (load {row['load']:.1f}): "
                  + ", ".join(f"{k} {_fmt(row.get(k))}" for k in KEYS), flush=True)
    lines = ["## Start-up beside CPU-bound work", "",
             f"`python -m benchmarks.studies.bench_startup_busy --repeat {args.repeat} --busy "
             f"{args.busy} --write` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"{os.cpu_count()} cores shared with other work (1-minute load at the launches "
             f"{min(r['load'] for r in quiet + busy):.1f}–"
             f"{max(r['load'] for r in quiet + busy):.1f}); Qt platform "
             f"{os.environ.get('QT_QPA_PLATFORM', 'offscreen')}. Seconds after launch (wall) "
             "and CPU seconds of each process at the first curve; medians.", "",
             "| launches | window shown | engine ready | first curve + iterate | GUI CPU | "
             "engine CPU |", "|---|---|---|---|---|---|"]
    for name, rows in (("quiet", quiet), (f"{args.busy} CPU-bound beside", busy)):
        lines.append(f"| {name} | " + " | ".join(_fmt(_median(rows, k)) for k in KEYS) + " |")
    ratios = [(_median(busy, k) or 0) / q for k in EVENTS if (q := _median(quiet, k))]
    lines += ["", "Busy / quiet (same run): " + ", ".join(
        f"{k} ×{r:.2f}" for k, r in zip(EVENTS, ratios, strict=False)), ""]
    text = "\n".join(lines)
    print(text)
    if args.write:
        OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
