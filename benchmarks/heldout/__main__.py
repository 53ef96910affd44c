"""``python -m benchmarks.heldout``: see the package's docstring."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import load_average, write_section
from benchmarks.heldout import design, report
from benchmarks.heldout.measure import run_case


def _uptime() -> str:
    loads = os.getloadavg()
    return ", ".join(f"{v:.2f}" for v in loads)


def _measured(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("status") != report.NOT_RUN]


def _section(args: argparse.Namespace, path: Path, rows: list[dict], load_start: str,
             minutes: float) -> str:
    """The half's RESULTS.md section: the command, what is compared, the load, the table."""
    options = f" --half {args.half}" + (" --quick" if args.quick else "") + \
        f" --cap {args.cap:g}" + ("" if args.budget_min is None else
                                  f" --budget-min {args.budget_min:g}") + \
        (" --resume" if args.resume else "")
    where = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
    kept = " (with --resume: rows measured by earlier runs are kept)" if args.resume else ""
    loads = [r["load"] for r in rows if isinstance(r.get("load"), float)]
    if loads:
        kept += f"; 1-min load at the end of each measured case {min(loads):.1f}–{max(loads):.1f}"
    return "\n".join([
        f"<!-- heldout-{args.half}:start -->",
        f"## Held-out evaluation: {args.half} half, lbi at its defaults vs L-BFGS",
        "", f"`nice -n 10 python -m benchmarks.heldout{options} --write` (rows: `{where}`). "
        "Δ = lbi's PSNR − L-BFGS's at its best of three α (`measure.grid`); solve-time "
        "ratio = (lbi's wall time − its one-iteration run's) / L-BFGS's time to within 0.2 dB "
        f"of its final PSNR. lbi runs with `--time-budget {args.cap:g}`: a run that reaches "
        "it (capped) counts as failing both bars; where the table lists one, Δ is where it "
        "got to. The machine (2 cores) is shared with other work: load average (`uptime`) "
        f"{load_start} at the start, {_uptime()} at the end, {minutes:.0f} min of this "
        f"run{kept}; times are ratios measured in the same run.", "", *report.table(rows),
        "", report.summary(rows), "", f"<!-- heldout-{args.half}:end -->"])


def main(argv: list[str] | None = None) -> int:
    import benchmarks.heldout as package

    parser = argparse.ArgumentParser(prog="python -m benchmarks.heldout",
                                     description=(package.__doc__ or "").split("\n\n")[0])
    parser.add_argument("--half", choices=design.HALVES, required=True)
    parser.add_argument("--quick", action="store_true",
                        help="one tiny 16x16 case, 30 lbi iterations: a smoke run")
    parser.add_argument("--arch", default="", help="comma-separated architectures (default all)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the CSV's rows of cases already measured, run the rest")
    parser.add_argument("--cap", type=float, default=300.0,
                        help="seconds after which an lbi run is stopped and counted as failed")
    parser.add_argument("--budget-min", type=float, default=None,
                        help="start no case after this many minutes; the rest are listed as "
                             "not run")
    parser.add_argument("--csv", type=Path, default=None, help="where the rows go")
    parser.add_argument("--write", action="store_true", help="write the table to RESULTS.md")
    args = parser.parse_args(argv)
    archs = [a for a in args.arch.split(",") if a]
    unknown = set(archs) - set(design.ARCHS)
    if unknown:
        parser.error(f"--arch: unknown {sorted(unknown)}; known: {', '.join(design.ARCHS)}")
    if args.write and (args.quick or archs):
        parser.error("--write replaces the half's table: run all architectures, not --quick")
    cases = [design.quick_case(args.half)] if args.quick else design.cases(args.half, archs)
    path = args.csv or report.csv_path(args.half, args.quick)
    done = {r["case"]: r for r in report.read_rows(path, args.cap)} if args.resume else {}
    load_start, started = _uptime(), time.perf_counter()
    rows = []
    for case in cases:
        if case.key in done:
            rows.append(done[case.key])
            continue
        if args.budget_min is not None and time.perf_counter() - started > 60 * args.budget_min:
            rows.append({"case": case.key, "arch": case.arch, "side": case.side,
                         "format": design.ARCHS[case.arch].fmt if case.arch in design.ARCHS
                         else "", "status": report.NOT_RUN, "message": ""})
            continue
        with tempfile.TemporaryDirectory() as tmp:
            row = run_case(case, Path(tmp), quick=args.quick, cap=args.cap)
        row["load"] = load_average()
        rows.append(row)
        report.write_rows(path, _measured([*rows, *(r for k, r in done.items()
                                                    if k not in {x["case"] for x in rows})]))
        print(f"{case.key}: {row.get('status')} lbi {row.get('lbi_psnr', '–')} dB "
              f"L-BFGS {row.get('lbfgs_psnr', '–')} dB solve ratio "
              f"{row.get('time_ratio', '–')} {row.get('message', '')}", flush=True)
    report.write_rows(path, _measured(rows))
    text = _section(args, path, rows, load_start, (time.perf_counter() - started) / 60)
    print(text)
    if args.write:
        write_section(text, f"<!-- heldout-{args.half}:start -->",
                      f"<!-- heldout-{args.half}:end -->")
    return 0


if __name__ == "__main__":
    sys.exit(main())
