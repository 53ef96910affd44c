"""Shared machinery: interleaved timing, machine description, result records.

Why interleaved: the machines this runs on are shared and their load changes from second to
second (a 2-core VM next to test suites). Timing a candidate and its floor one after the other
would compare two different machines; alternating short chunks of both and taking the median
of the per-round ratios compares them under the same load.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Figure:
    """One measured number with what it is compared against.

    ``ratio`` is value / reference unless given; ``target`` is a human-readable goal such
    as "<= 1.3" and ``passed`` says whether the goal was met (None: no goal, or not measured).
    """

    name: str
    value: float | None
    unit: str = ""
    reference: float | None = None
    reference_name: str = ""
    ratio: float | None = None
    target: str = ""
    passed: bool | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.ratio is None and self.value is not None and self.reference:
            self.ratio = self.value / self.reference


@dataclass
class Section:
    """The result of one benchmark: figures, free text, and how long it took."""

    name: str
    title: str
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    skipped: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def add(self, *figures: Figure) -> None:
        self.figures.extend(figures)

    def note(self, text: str) -> None:
        self.notes.append(text.strip())


def check(value: float | None, limit: float, below: bool = True) -> bool | None:
    """value <= limit (below) or value >= limit; None when value is unknown."""
    if value is None or not math.isfinite(value):
        return None
    return value <= limit if below else value >= limit


def interleaved(
    candidates: dict[str, Callable[[], object]],
    rounds: int,
    inner: int = 1,
    warmup: int = 1,
) -> dict[str, list[float]]:
    """Seconds per call of each candidate, one sample per round, rounds alternating.

    Each round calls every candidate ``inner`` times in a row (order rotated per round to
    cancel drift) and records the mean; the caller takes medians or per-round ratios.
    """
    names = list(candidates)
    for _ in range(warmup):
        for name in names:
            candidates[name]()
    out: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            fn = candidates[name]
            start = time.perf_counter()
            for _ in range(inner):
                fn()
            out[name].append((time.perf_counter() - start) / inner)
    return out


def median(values: list[float]) -> float:
    return statistics.median(values)


def ratio_median(samples: dict[str, list[float]], num: str, den: str) -> float:
    """Median over rounds of num/den: each round's two numbers share the machine's load."""
    return statistics.median(a / b for a, b in zip(samples[num], samples[den], strict=True))


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def machine() -> dict[str, Any]:
    """What the figures were measured on (no host names or user data)."""
    import torch

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(terse=True),
        "cuda": torch.cuda.is_available(),
    }
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as handle:
            kb = int(handle.readline().split()[1])
            info["memory_gib"] = round(kb / 2**20, 1)
    except OSError:
        pass
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


class Timer:
    """Wall-clock seconds of a ``with`` block."""

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start


def threads(n: int) -> Callable[[], None]:
    """Sets torch's intra-op threads; returns a function that restores the old value."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    return lambda: torch.set_num_threads(old)


def write_section(text: str, start: str, end: str) -> None:
    """Replaces the part of benchmarks/RESULTS.md between the markers ``start`` and ``end``
    (``text`` carries both) with ``text``, or appends it where the markers are absent."""
    from pathlib import Path

    path = Path(__file__).resolve().parent / "RESULTS.md"
    old = path.read_text(encoding="utf-8")
    if start in old:
        head, rest = old.split(start, 1)
        new = head + text + (rest.split(end, 1)[1] if end in rest else "")
    else:
        new = old.rstrip("\n") + "\n\n" + text + "\n"
    path.write_text(new, encoding="utf-8")
