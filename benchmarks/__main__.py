"""``python -m benchmarks [--quick] [--only NAME ...] [--out FILE]``: run and write RESULTS.md."""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

from benchmarks import BENCHMARKS, NOTES_FILE, RESULTS_FILE
from benchmarks._common import Section, load_average, machine
from benchmarks.report import render, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Performance benchmarks of lbi (not part of the test run). Every figure "
                    "is a ratio against a floor or a peer measured in the same run.")
    parser.add_argument("--quick", action="store_true",
                        help="reduced sizes and repetitions (about 1-2 minutes)")
    parser.add_argument("--only", nargs="+", choices=list(BENCHMARKS), metavar="NAME",
                        help=f"run only these ({', '.join(BENCHMARKS)})")
    parser.add_argument("--out", type=Path, default=RESULTS_FILE,
                        help=f"where to write the report (default {RESULTS_FILE})")
    args = parser.parse_args(argv)

    import torch

    torch.manual_seed(0)
    names = args.only or list(BENCHMARKS)
    info = machine()
    load_start = load_average()
    start = time.perf_counter()
    sections: list[Section] = []
    failed = False
    for name in names:
        module, title = BENCHMARKS[name]
        print(f"[benchmarks] {name}: {title} ...", flush=True)
        t0 = time.perf_counter()
        try:
            suite_module = __import__(f"benchmarks.suite.{module}", fromlist=["run"])
            section = suite_module.run(quick=args.quick)
        except Exception:  # a broken benchmark must not lose the others' figures
            failed = True
            section = Section(name, title, skipped="error:\n\n```\n" + traceback.format_exc()
                              + "```")
        section.seconds = time.perf_counter() - t0
        sections.append(section)
        for f in section.figures:
            ratio = "" if f.ratio is None else f"  ratio {f.ratio:.3g}"
            value = "—" if f.value is None else f"{f.value:.4g}"
            verdict = {True: " [met]", False: " [NOT met]", None: ""}[f.passed]
            print(f"    {f.name}: {value} {f.unit}{ratio}{verdict}", flush=True)
        print(f"    ({section.seconds:.0f} s)", flush=True)
    seconds = time.perf_counter() - start
    command = "python -m benchmarks" + (" --quick" if args.quick else "") + (
        f" --only {' '.join(args.only)}" if args.only else "")
    preamble = NOTES_FILE.read_text(encoding="utf-8") if NOTES_FILE.exists() else ""
    text = render(sections, info, args.quick, (load_start, load_average()), seconds, command,
                  preamble)
    write(args.out, text)
    print(f"[benchmarks] wrote {args.out} ({seconds:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
