"""Writes benchmarks/RESULTS.md from the sections of one run."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

from benchmarks._common import Figure, Section


def _num(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "—"
    if not math.isfinite(value):
        return str(value)
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        return f"{value:.{digits}g}"
    return f"{value:.{digits}g}" if abs(value) < 100 else f"{value:.0f}"


def _row(f: Figure) -> str:
    verdict = {True: "yes", False: "**no**", None: ""}[f.passed]
    value = f"{_num(f.value)} {f.unit}".strip()
    reference = f"{_num(f.reference)} {f.reference_name}".strip() if f.reference is not None \
        else f.reference_name
    cells = [f.name, value, reference, _num(f.ratio), f.target, verdict, f.note]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def render(sections: list[Section], info: dict[str, Any], quick: bool,
           loads: tuple[float | None, float | None], seconds: float, command: str,
           preamble: str = "") -> str:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Benchmark results",
        "",
        f"Written by `{command}` on {now} in {seconds:.0f} s"
        + (" — **quick mode: fewer repetitions, and sections 3, 4 and 6 use a reduced circle "
           "problem (32x32, W 128x1024); their targets are indicative only**"
           if quick else "") + ".",
        "",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in info.items()) + ".",
        f"Load average (1 min) at start / end: {_num(loads[0])} / {_num(loads[1])} "
        "(a loaded shared machine: every figure is a ratio measured in the same run, "
        "interleaved with its reference).",
        "",
    ]
    if preamble:
        lines += [preamble.strip(), ""]
    summary = [f for s in sections for f in s.figures if f.target]
    if summary:
        lines += ["## Summary of the targets", "",
                  "| figure | value | reference | ratio | target | met | note |",
                  "|---|---|---|---|---|---|---|"]
        lines += [_row(f) for f in summary]
        lines.append("")
    for s in sections:
        lines += [f"## {s.title}", ""]
        if s.skipped:
            lines += [f"Skipped: {s.skipped}", ""]
        if s.figures:
            lines += ["| figure | value | reference | ratio | target | met | note |",
                      "|---|---|---|---|---|---|---|"]
            lines += [_row(f) for f in s.figures]
            lines.append("")
        for note in s.notes:
            lines += [note, ""]
        lines += [f"_Section time: {s.seconds:.0f} s._", ""]
    return "\n".join(lines).rstrip() + "\n"


def write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
