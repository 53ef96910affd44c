"""benchmarks/studies/bench_startup.py's bookkeeping (the launches themselves are timed, not
tested): medians per group, the comparison rows, CPU seconds read from /proc, and --write
replacing only its own block of RESULTS.md."""

from __future__ import annotations

import os
import sys
import time

import pytest

from benchmarks.studies import bench_startup as bench


def _row(first_curve: float, load: float = 2.0) -> dict:
    return {"window": 1.0, "engine_ready": 3.0, "first_curve": first_curve, "gui_cpu": 1.0,
            "engine_cpu": 2.5, "truth_at_window": True, "run_enabled_at_window": True,
            "load": load}


def test_table_gives_each_group_its_median_and_the_load_range() -> None:
    text = bench.table([_row(5.0), _row(7.0, 3.5), _row(6.0)],
                       [_row(9.0), _row(8.0), _row(10.0, 1.5)], "main-abc")
    assert "| median | | 1.00 s | 3.00 s | 6.00 s | 1.00 s | 2.50 s | | |" in text
    assert "| main-abc median | | 1.00 s | 3.00 s | 9.00 s |" in text
    assert "load average 1.5–3.5" in text and "--compare main-abc" in text


def test_missing_marks_show_as_dashes() -> None:
    row = _row(5.0)
    row["first_curve"] = None
    row["engine_cpu"] = None
    text = bench.table([row])
    assert "| median | | 1.00 s | 3.00 s | — | 1.00 s | — | | |" in text


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_cpu_seconds_of_a_live_process() -> None:
    t0 = time.process_time()
    while time.process_time() - t0 < 0.05:
        pass
    assert bench._cpu_seconds(os.getpid()) >= 0.04
    assert bench._cpu_seconds(None) is None


def test_write_replaces_only_its_block(tmp_path, monkeypatch) -> None:
    results = tmp_path / "RESULTS.md"
    results.write_text(f"# R\n\nbefore\n\n{bench.BEGIN}\nold\n{bench.END}\n\nafter\n")
    monkeypatch.setattr(bench, "RESULTS", results)
    bench.write("new section")
    assert results.read_text() == f"# R\n\nbefore\n\n{bench.BEGIN}\nnew section\n{bench.END}" \
                                  "\n\nafter\n"
