"""Rows to CSV, and the per-architecture table of one half."""

from __future__ import annotations

import csv
import math
import os
import statistics
from pathlib import Path

from benchmarks.heldout.design import SIDE

RESULTS = Path(__file__).resolve().parents[1] / "results"
#: the issue's bars: within 0.5 dB of L-BFGS (and never 2 dB below), at most 2x its time
CLOSE_DB, WORST_DB, TIME_RATIO = -0.5, -2.0, 2.0
#: the status of a case the run had no time left for: listed, counted in no bar
NOT_RUN = "not run"


def csv_path(half: str, quick: bool = False) -> Path:
    return RESULTS / f"heldout-{half}{'-quick' if quick else ''}.csv"


def read_rows(path: Path, cap: float | None = None) -> list[dict]:
    """The CSV's rows; with ``cap`` (for rows that do not record theirs) a run that reached
    lbi's time budget is marked capped, as ``measure.run_case`` marks it."""
    from benchmarks.heldout.measure import reached_cap

    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as f:
        rows = [_typed(r) for r in csv.DictReader(f)]
    for r in rows:
        row_cap = r.get("cap_s") if isinstance(r.get("cap_s"), float) else cap
        if r.get("status") == "ok" and row_cap is not None and reached_cap(r, row_cap):
            r.update(status="capped", message=f"stopped by the {row_cap:g} s cap")
    return rows


def _typed(row: dict) -> dict:
    out: dict = {}
    for k, v in row.items():
        try:
            out[k] = float(v) if v not in ("", None) and k not in ("case", "photo") else v
        except ValueError:
            out[k] = v
    return out


def write_rows(path: Path, rows: list[dict]) -> None:
    """All rows, atomically (a killed run leaves the previous file)."""
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def _num(r: dict, key: str) -> float:
    v = r.get(key)
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else math.nan


def _fmt(v: float, spec: str = ".2f") -> str:
    return "–" if not math.isfinite(v) else format(v, spec)


def _median(values: list[float]) -> float:
    values = [v for v in values if math.isfinite(v)]
    return statistics.median(values) if values else math.nan


def _failure(row: dict) -> str:
    """What a case that is not "ok" says in the table; a capped run adds where it got to."""
    text = str(row.get("message", ""))[:90]
    if row.get("status") == "capped":
        text += f" (Δ {_fmt(_num(row, 'diff_db'))} dB there)"
    return text


def table(rows: list[dict]) -> list[str]:
    """One line per architecture (64 x 64 cases), then one per size case. A case that lbi
    refused, that its time budget (the cap) stopped or that ran past the hard stop counts as
    below both bars."""
    lines = ["| architecture | file | cases run / all | median Δ dB | worst Δ dB | "
             "≥ −0.5 dB | median solve-time ratio | ≤ 2× | median lbi solve (s) | "
             "median L-BFGS (s) | α search / solver total (s) | refused, capped or timed out |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    archs = list(dict.fromkeys(r["arch"] for r in rows))
    for arch in archs:
        everything = [r for r in rows if r["arch"] == arch and _num(r, "side") == SIDE]
        group = [r for r in everything if r.get("status") != NOT_RUN]
        pending = len(everything) - len(group)
        if not everything:
            continue
        ok = [r for r in group if r.get("status") == "ok"]
        diffs = [_num(r, "diff_db") for r in ok]
        ratios = [_num(r, "time_ratio") for r in ok]
        close = sum(d >= CLOSE_DB for d in diffs)
        fast = sum(t <= TIME_RATIO for t in ratios)
        failed = sorted({_failure(r) for r in group if r.get("status") != "ok"})
        lines.append(
            f"| {arch} | {everything[0]['format']} | {len(ok)}/{len(group)}"
            f"{f' (+{pending} not run)' if pending else ''} | "
            f"{_fmt(_median(diffs))} | {_fmt(min(diffs, default=math.nan))} | "
            f"{close}/{len(group)} | {_fmt(_median(ratios), '.1f')} | {fast}/{len(group)} | "
            f"{_fmt(_median([_num(r, 'lbi_solve_s') for r in ok]), '.1f')} | "
            f"{_fmt(_median([_num(r, 'lbfgs_time_s') for r in ok]), '.2f')} | "
            f"{_fmt(_median([_num(r, 't_alpha_search') for r in ok]), '.1f')} / "
            f"{_fmt(_median([_num(r, 't_solver_total') for r in ok]), '.1f')} | "
            f"{'; '.join(failed)} |")
    sized = [r for r in rows if _num(r, "side") != SIDE and r.get("status") != NOT_RUN]
    if sized:
        lines += ["", "| size case | lbi PSNR | L-BFGS PSNR | Δ dB | lbi whole run (s) | "
                  "L-BFGS (s) | peak RSS (GB) | status |", "|---|---|---|---|---|---|---|---|"]
        for r in sized:
            lines.append(
                f"| {r['arch']} {int(_num(r, 'side'))}×{int(_num(r, 'side'))} | "
                f"{_fmt(_num(r, 'lbi_psnr'))} | {_fmt(_num(r, 'lbfgs_psnr'))} | "
                f"{_fmt(_num(r, 'diff_db'))} | {_fmt(_num(r, 'lbi_wall_s'), '.1f')} | "
                f"{_fmt(_num(r, 'lbfgs_time_s'), '.1f')} | {_fmt(_num(r, 'lbi_peak_gb'))} | "
                f"{r.get('status')} {str(r.get('message', ''))[:80]} |")
    return lines


def summary(rows: list[dict]) -> str:
    small = [r for r in rows if _num(r, "side") == SIDE and r.get("status") != NOT_RUN]
    pending = sum(r.get("status") == NOT_RUN for r in rows)
    if not small:
        return "no 64×64 case measured"
    diffs = [_num(r, "diff_db") if r.get("status") == "ok" else -math.inf for r in small]
    ratios = [_num(r, "time_ratio") if r.get("status") == "ok" else math.inf for r in small]
    close = sum(d >= CLOSE_DB for d in diffs)
    never = sum(d >= WORST_DB for d in diffs)
    fast = sum(t <= TIME_RATIO for t in ratios)
    n = len(small)
    return (f"All 64×64 cases: {close}/{n} within 0.5 dB of L-BFGS (bar ≥ 90 %), {never}/{n} "
            f"above −2 dB (bar: all), {fast}/{n} with solve time ≤ 2× L-BFGS's (bar: all); "
            f"refused, capped or timed out: {sum(r.get('status') != 'ok' for r in small)}"
            + (f"; {pending} cases not run (time budget)." if pending else "."))
