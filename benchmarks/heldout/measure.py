"""One case of the held-out evaluation: lbi as a user runs it, and L-BFGS on the same data.

lbi: the network exported to a file, the crop written as PNG, then in a subprocess
``lbi invert --network F --image crop.png --noise-std S --seed K --out D
--memory-limit 4G`` (S the case's noise std in the output's units, K its seed: lbi's noise
is drawn from K, so the run is the user's at the defaults; the memory limit only refuses
what would not fit the machine's share; ``--time-budget CAP`` stops runs far past any bar,
and such a run counts as failing both) and the same with ``--max-iter 1``: the solve time
is the difference of their wall times, so start-up, reading and lifting are not counted and
the alpha choice is.

L-BFGS: ``bench_graph_slices.lbfgs_curves`` (torch.optim.LBFGS, strong Wolfe, on
1/2 ||N(x) - y||^2 + alpha TV_eps(x) from mid-grey through the torch module) on lbi's own
noisy y, rebuilt from result.json's request; the best final PSNR over ``grid``'s three
alphas, and the time its run took to come within 0.2 dB of that final PSNR.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from benchmarks.bench_graph_slices import lbfgs_curves, lbi_data, run_lbi
from benchmarks.heldout import nets, training
from benchmarks.heldout.design import Case, photograph, write_png

MEMORY_LIMIT = "4G"
#: the grid's spread around its centre (see ``grid``)
SPREAD = (0.1, 1.0, 10.0)
#: the noise level the grid is centred for when the case has none (on the calibration half
#: 0.002 put L-BFGS's best alpha at the grid's lower edge in noise-free cases)
FLOOR = 0.0005
WITHIN_DB = 0.2
#: seconds past the cap (lbi's --time-budget) before the run is killed: start-up and lifting
HARD_STOP_S = 180.0


def module_for(case: Case) -> nn.Module:
    if case.weights == "trained":
        return training.trained(case.arch)
    return nets.build(case.arch, case.seed)


def export(module: nn.Module, path: Path, side: int) -> Path:
    example = (torch.rand(1, 3, side, side),)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        if path.suffix == ".onnx":
            torch.onnx.export(module, example, str(path))
        else:
            torch.export.save(torch.export.export(module, example), str(path))
    return path


def grid(y: torch.Tensor, truth: torch.Tensor, std: float, rms: float) -> tuple[float, ...]:
    """Three alphas around the weight at which alpha TV(x_true) equals the expected squared
    noise norm m s^2 (s: the noise std, at least FLOOR times the output's RMS)."""
    s = max(std, FLOOR * rms)
    gh = torch.diff(truth, dim=-2)
    gw = torch.diff(truth, dim=-1)
    tv = float(torch.sqrt(gh[..., :, :-1] ** 2 + gw[..., :-1, :] ** 2).sum())
    centre = y.numel() * s * s / max(tv, 1e-12)
    return tuple(centre * f for f in SPREAD)


def _time_within(curve: list[tuple[float, float]], db: float = WITHIN_DB) -> float:
    final = curve[-1][1]
    return next(t for t, p in curve if p >= final - db)


def lbfgs_best(module: nn.Module, y: torch.Tensor, truth: torch.Tensor,
               alphas: tuple[float, ...], iters: int = 300) -> dict:
    curves = lbfgs_curves(module, y, truth, alphas, iters=iters)
    alpha, curve = max(curves.items(), key=lambda kv: kv[1][-1][1])
    return {"lbfgs_psnr": curve[-1][1], "lbfgs_alpha": alpha,
            "lbfgs_alpha_at_edge": alpha in (alphas[0], alphas[-1]),
            "lbfgs_time_s": _time_within(curve), "lbfgs_final_s": curve[-1][0],
            "lbfgs_iters": len(curve)}


def _stage_times(metrics: dict) -> dict:
    """The time split where result.json records it: a ``timings`` mapping of stage seconds
    if the engine writes one, else the alpha path's solves and the solver's seconds."""
    timings = metrics.get("timings")
    if isinstance(timings, dict):
        return {f"t_{k}": v for k, v in timings.items() if isinstance(v, (int, float))}
    path = metrics.get("alpha_path") or []
    out = {"path_points": len(path)}
    if path and all("seconds" in p for p in path):
        out["t_alpha_search"] = sum(float(p["seconds"]) for p in path)
    if isinstance(metrics.get("seconds"), (int, float)):
        out["t_solver_total"] = float(metrics["seconds"])  # as result.json reports it
    return out


def reached_cap(row: dict, cap: float) -> bool:
    """Whether lbi's time budget (the cap) stopped the run or one of its stages: its stop
    reason says so, or a stage's recorded seconds reached 95 % of the cap."""
    times = [row.get(k) for k in ("t_alpha_search", "t_solver_total")]
    return row.get("lbi_stop") == "time_budget" or any(
        isinstance(t, float) and t >= 0.95 * cap for t in times)


def run_case(case: Case, folder: Path, quick: bool = False, cap: float = 300.0) -> dict:
    """Everything measured on one case, as one flat CSV row."""
    a = nets.arch(case.arch)
    row: dict = {"case": case.key, "half": case.half, "arch": case.arch, "format": a.fmt,
                 "weights": case.weights, "photo": case.photo, "seed": case.seed,
                 "noise_frac": case.noise, "side": case.side}
    module = module_for(case)
    image = write_png(case.photo, case.side, folder)
    truth = torch.from_numpy(photograph(case.photo, case.side).transpose(2, 0, 1).copy())
    with torch.no_grad():
        clean = module(truth[None].float() / 255)
    rms = float(clean.pow(2).mean().sqrt())
    std = case.noise * rms
    row.update(output_rms=rms, noise_std=std)
    network = export(module, folder / f"{case.arch}.{a.fmt}", case.side)
    extra = ("--seed", str(case.seed), "--memory-limit", MEMORY_LIMIT,
             *(("--max-iter", "30") if quick else ()))
    out = folder / "run"
    # the cap: lbi's own time budget, so a capped run still reports where it got to, and a
    # hard stop for start-up and lifting on top of it
    lbi = run_lbi(network, image, out, std, (*extra, "--time-budget", f"{cap:g}"),
                  timeout=cap + HARD_STOP_S)
    if "error" in lbi:
        row.update(status="timeout" if lbi.get("timeout") else "refused",
                   message=lbi["error"][:200])
        return row
    one = run_lbi(network, image, folder / "one", std, (*extra, "--max-iter", "1"),
                  timeout=cap + HARD_STOP_S)
    metrics = json.loads((out / "result.json").read_text())["metrics"]
    row.update(status="ok", message="", cap_s=cap, lbi_psnr=lbi["psnr"],
               lbi_wall_s=lbi["wall_s"],
               lbi_one_iter_s=one.get("wall_s", math.nan),
               lbi_iters=lbi["iterations"], lbi_alpha=lbi["alpha"],
               lbi_alpha_rule=metrics.get("alpha_rule", ""), lbi_stop=lbi["stop"],
               lbi_peak_gb=lbi["peak_gb"], **_stage_times(metrics))
    row["lbi_solve_s"] = row["lbi_wall_s"] - row["lbi_one_iter_s"]
    if reached_cap(row, cap):
        row.update(status="capped", message=f"stopped by the {cap:g} s cap")
    y, x_true = lbi_data(out)
    row.update(lbfgs_best(module, y, x_true, grid(y, x_true, std, rms),
                          iters=20 if quick else 300))
    row["diff_db"] = row["lbi_psnr"] - row["lbfgs_psnr"]
    row["time_ratio"] = row["lbi_solve_s"] / max(row["lbfgs_time_s"], 1e-9)
    return row


def finite_numbers(row: dict) -> bool:
    keys = ("lbi_psnr", "lbi_solve_s", "lbfgs_psnr", "lbfgs_time_s", "diff_db", "time_ratio")
    return all(isinstance(row.get(k), float) and np.isfinite(row[k]) for k in keys)
