"""Markdown reports of the reproductions: tables of computed numbers, figures, timing.

Every number in a report is formatted from a value computed in the same run (never typed
in); the paper's published values appear only in columns labelled "paper".
"""

from __future__ import annotations

import math
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lbi_engine.io import atomic_write_text, safe_output_path

REPORT_NAME = "report.md"


def num(value: Any, digits: int = 4) -> str:
    """A table cell: 4 significant digits, '–' for undefined, ints as ints."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        return f"{value:.{digits - 1}e}"
    return f"{value:.{digits}g}" if abs(value) < 1 else f"{value:.{max(digits - 2, 1)}f}"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table; non-strings go through :func:`num`."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        cells = [cell if isinstance(cell, str) else num(cell) for cell in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def mean(values: Sequence[float | None]) -> float | None:
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return sum(finite) / len(finite) if finite else None


@dataclass
class Report:
    """Collects the sections of one experiment's report and writes it with its timing."""

    title: str
    out_dir: Path
    quick: bool = False
    overwrite: bool = False
    sections: list[str] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    numbers: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from lbi_engine.results.owned_folders import owned_folder

        self.out_dir = owned_folder(self.out_dir)  # never through a link planted at its name
        safe_output_path(self.out_dir / REPORT_NAME, self.overwrite)  # refuse before working

    def path(self, name: str) -> Path:
        """Where a figure/file of this report goes (refused if it exists, unless overwrite)."""
        return safe_output_path(self.out_dir / name, self.overwrite)

    def add(self, text: str) -> None:
        self.sections.append(text.strip("\n"))

    def figure(self, path: Path, caption: str) -> None:
        self.figures.append(Path(path))
        self.sections.append(f"![{caption}]({Path(path).name})\n\n*{caption}*")

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started

    def write(self) -> Path:
        """Writes report.md (atomically) with the run time and environment at the end."""
        import torch

        from lbi_engine import __version__

        mode = "quick smoke run (reduced sizes, numbers are NOT the paper's setting)" \
            if self.quick else "full run"
        self.numbers["seconds"] = self.seconds
        footer = (
            f"---\nRun time: **{self.seconds:.1f} s** ({mode}) on "
            f"{platform.machine()} with {torch.get_num_threads()} torch thread(s); "
            f"lbi {__version__}, torch {torch.__version__}, Python {platform.python_version()}."
        )
        text = f"# {self.title}\n\n" + "\n\n".join([*self.sections, footer]) + "\n"
        target = self.out_dir / REPORT_NAME
        safe_output_path(target, self.overwrite)
        atomic_write_text(target, text)
        return target


def command_line(args: Sequence[str]) -> str:
    """A shell command shown in a report (for readers who want to repeat one run)."""
    return "```\n" + " ".join(args) + "\n```"
