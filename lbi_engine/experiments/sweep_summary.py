"""A sweep's summary.md and plots, derived from its rows (results.csv) on every run.

Every cell counts, alpha "auto" included: the plots show the auto cells beside the grid (at
the mean alpha they chose), and "best" is the best of all cells. An auto cell is a real
contender: it is the setting `lbi invert` runs by default.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lbi_engine.experiments.report import mean, table

#: The auto cells' marker in the plots (a star, larger than the grid's points).
AUTO_STYLE = "*"


def cell_alpha(alpha: float | str) -> float | str:
    """A cell's alpha key: a float, or "auto"."""
    return alpha if alpha == "auto" else float(alpha)


def _alpha_order(alpha: float | str) -> tuple[int, float]:
    return (1, 0.0) if alpha == "auto" else (0, float(alpha))


def _float(text: str | None) -> float | None:
    if text is None:  # a column an older sweep CSV does not have
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def aggregate(rows: Sequence[dict[str, str]]
              ) -> dict[tuple[str, float, float | str], dict[str, Any]]:
    """Mean metrics per (method, noise std, alpha) over the samples; alpha may be "auto"."""
    groups: dict[tuple[str, float, float | str], list[dict[str, str]]] = {}
    for row in rows:
        key = (row["method"], float(row["noise_std"]), cell_alpha(row["alpha"]))
        groups.setdefault(key, []).append(row)
    return {
        key: {
            "samples": len(group),
            "psnr": mean([_float(r["psnr"]) for r in group]),
            "ssim": mean([_float(r["ssim"]) for r in group]),
            "decoder_psnr": mean([_float(r["decoder_psnr"]) for r in group]),
            "delta_squared": mean([_float(r["delta_squared"]) for r in group]),
            "iterations": mean([_float(r["iterations"]) for r in group]),
            "alpha_chosen": mean([_float(r.get("alpha_chosen")) for r in group]),
        }
        for key, group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                                 _alpha_order(kv[0][2])))
    }


def alpha_words(alpha: float | str, stats: dict[str, Any]) -> str:
    """"0.001", or "auto (mean chosen 0.0003125)" for an auto cell."""
    if alpha != "auto":
        return f"{float(alpha):.4g}"
    chosen = stats.get("alpha_chosen")
    return "auto" if chosen is None else f"auto (mean chosen {chosen:.4g})"


def best_cells(stats: dict[tuple[str, float, float | str], dict[str, Any]], method: str | None,
               std: float) -> tuple[tuple[str, float, float | str], dict[str, Any]] | None:
    """The cell of the highest mean PSNR at noise ``std`` (of one method, or of all), over
    every alpha, auto included; None when no cell there has a PSNR."""
    cands = [(v["psnr"], k) for k, v in stats.items()
             if k[1] == float(std) and (method is None or k[0] == method)
             and v["psnr"] is not None]
    if not cands:
        return None
    _, key = max(cands, key=lambda c: c[0])
    return key, stats[key]


def write_summary(spec: Any, rows: Sequence[dict[str, str]], out: Path) -> list[Path]:
    """psnr_vs_alpha.png, psnr_vs_noise.png and summary.md from the rows (overwritten)."""
    from lbi_engine.io import atomic_write_text as write

    stats = aggregate(rows)
    if not stats:
        return []
    files = _plots(spec, stats, out)
    text = io.StringIO()
    text.write(f"# Sweep of `{spec.network}` on {spec.dataset}/{spec.split} samples "
               f"{', '.join(map(str, spec.indices))}\n\n")
    text.write("Means over the samples. Every cell counts, alpha auto included (chosen per "
               "sample, as `lbi invert` does by default).\n\n")
    text.write("## Best cell per noise std\n\n")
    overall = [best_cells(stats, None, std) for std in spec.noise_stds]
    text.write(table(["noise std", "method", "α", "mean PSNR", "mean SSIM"],
                     [[k[1], k[0], alpha_words(k[2], v), v["psnr"], v["ssim"]]
                      for k, v in (b for b in overall if b is not None)]))
    text.write("\n\n## Best α per method and noise std\n\n")
    best_rows = []
    for method in spec.methods:
        for std in spec.noise_stds:
            best = best_cells(stats, method, std)
            if best is not None:
                (_, _, alpha), v = best
                best_rows.append([method, std, alpha_words(alpha, v), v["psnr"],
                                  v["decoder_psnr"], v["delta_squared"]])
    text.write(table(["method", "noise std", "best α", "mean PSNR", "mean decoder PSNR",
                      "mean δ²"], best_rows))
    text.write("\n\n## Every cell (means over the samples)\n\n")
    text.write(table(["method", "noise std", "α", "samples", "PSNR", "SSIM", "iterations",
                      "mean chosen α (auto)"],
                     [[k[0], k[1], k[2], v["samples"], v["psnr"], v["ssim"],
                       None if v["iterations"] is None else round(v["iterations"]),
                       v["alpha_chosen"]]
                      for k, v in stats.items()]))
    text.write("\n\n![PSNR against alpha](psnr_vs_alpha.png)\n\n"
               "![PSNR against noise](psnr_vs_noise.png)\n")
    write(out / "summary.md", text.getvalue())
    return [*files, out / "summary.md"]


def _plots(spec: Any, stats: dict[tuple[str, float, float | str], dict[str, Any]],
           out: Path) -> list[Path]:
    from lbi_engine.results.plotting import Series, line_plot

    grid = [float(a) for a in spec.alphas if a != "auto"]
    by_alpha = []
    for number, (method, std) in enumerate((m, s) for m in spec.methods
                                           for s in spec.noise_stds):
        colour = f"C{number % 10}"  # a grid's line and its auto cell's star share a colour
        points = [(a, stats[(method, float(std), a)]["psnr"]) for a in grid
                  if (method, float(std), a) in stats]
        if points:
            by_alpha.append(Series([p[0] for p in points], [p[1] for p in points],
                                   f"{method}, std {std:g}", "o-", {"color": colour}))
        auto = stats.get((method, float(std), "auto"))
        if auto is not None and auto["alpha_chosen"] is not None:  # at its mean alpha
            by_alpha.append(Series([auto["alpha_chosen"]], [auto["psnr"]],
                                   f"{method}, std {std:g}, α auto", AUTO_STYLE,
                                   {"markersize": 12, "color": colour}))
    files = [line_plot(out / "psnr_vs_alpha.png", by_alpha, title="Mean PSNR against alpha",
                       xlabel="alpha (auto: the mean chosen)", ylabel="PSNR (dB)", logx=True,
                       overwrite=True)]
    by_noise = []
    for method in spec.methods:
        best = [(std, best_cells(stats, method, std)) for std in spec.noise_stds]
        shown = [(std, b[1]["psnr"]) for std, b in best if b is not None]
        if shown:
            by_noise.append(Series([s[0] for s in shown], [s[1] for s in shown],
                                   f"{method} (best cell, auto included)", "o-"))
        autos = [(std, stats[(method, float(std), "auto")]["psnr"]) for std in spec.noise_stds
                 if (method, float(std), "auto") in stats]
        if autos and grid:  # with no grid the best cell is the auto cell: one line is enough
            by_noise.append(Series([a[0] for a in autos], [a[1] for a in autos],
                                   f"{method} (α auto)", AUTO_STYLE + "--", {"markersize": 10}))
    decoder = [(std, mean([v["decoder_psnr"] for k, v in stats.items() if k[1] == float(std)]))
               for std in spec.noise_stds]
    if any(d is not None for _, d in decoder):
        by_noise.append(Series([d[0] for d in decoder], [d[1] for d in decoder], "decoder",
                               "s--"))
    files.append(line_plot(out / "psnr_vs_noise.png", by_noise,
                           title="Mean PSNR against the noise std", xlabel="noise std",
                           ylabel="PSNR (dB)", overwrite=True))
    return files
