"""Paper Sec. 5.2, Fig. 4-5 (MATH.md §9.3): PSNR of decoder and inversion against noise.

One study, run on a zoo autoencoder and its bundled validation images (:class:`Study`): the
paper's MNIST CNN (``noise``) and the residual colour-patch network (``natural``).
Gaussian noise of std s is added to the encoder's code. For every s the inversion runs
at the defaults a user gets (method auto = joint, TV, the objective stop rule) in two ways:

* the best alpha of a wide grid (four per decade from 0.56 down, warm-started from one alpha
  to the next, until two grid points past the best mean PSNR or 1e-4) -- what the paper does
  by hand, and an upper bound no rule can beat on average;
* alpha "auto" (lbi_engine/solvers/alpha/whole.py), per image, from the data and the noise std only;
* with the learned Gaussian input prior + box [0, 1] the network ships (``gaussian+box``,
  alpha "auto": its noise-scaled rule, MATH.md §4.3), per image.

Both are compared with the decoder applied to the noisy code. To tell a model's loss from a
solver's, the report gives the objective at the ground truth (auxiliary variables = its
forward states) next to the objective at the computed minimiser: a minimiser below the
truth's objective is as good as the model allows, whatever its PSNR. delta^2 is computed per
image with MATH.md §7 (it is not the paper's 6.80 at s = 0.33, see [AMBIGUITY 15]).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from lbi_engine.experiments.report import Report, command_line, mean, num, table

if TYPE_CHECKING:
    from lbi_engine.protocols import Problem
    from lbi_engine.solvers import IterateRecord

METHOD = "joint"
GRID_START, GRID_FACTOR, GRID_MIN, GRID_PAST = 10 ** -0.25, 10 ** -0.25, 1e-4, 2
GRID_FLAT_DB = 0.01  # PSNRs this close to the best are a plateau, not a point past it
PRIOR = "gaussian+box"  # the learned input prior the network ships (lbi prior), with its box


@dataclass(frozen=True)
class Study:
    """What a noise study runs on: a zoo autoencoder that ships an input prior, the bundled
    dataset and split its validation images come from, the noise stds and how many images."""

    network: str
    dataset: str
    stds: tuple[float, ...]
    samples: int
    title: str
    item: str  # one image, in the report's words ("digit", "patch")
    items: str  # their plural
    spacing: str  # why the evenly spaced indices are a fair choice
    split: str = "val"


MNIST = Study("mnist-cnn-ae", "mnist", (0.33, 0.25, 0.2, 0.15, 0.1, 0.05, 0.02, 0.01, 0.0), 5,
              "Noise study: decoder vs inversion of the CNN encoder (paper Sec. 5.2, Fig. 4-5)",
              "digit", "digits", "evenly spaced: the split is sorted by label")
# The residual colour network: fewer stds and patches than MNIST's (a colour solve costs
# several times a digit's: about a minute at std 0.05 on a busy 2-core machine).
NATURAL = Study("natural-res-ae", "natural", (0.1, 0.05, 0.02), 3,
                "Natural-image noise study: decoder vs inversion of the residual colour "
                "encoder", "patch", "patches",
                "evenly spaced over the split: its first half is astronaut, its second chelsea")


class _Quick(TypedDict):
    stds: tuple[float, ...]
    samples: int
    max_iter: int
    grid: int


QUICK: _Quick = {"stds": (0.1,), "samples": 1, "max_iter": 40, "grid": 3}


def _mean_psnr(record: IterateRecord) -> float:
    """The batch's mean PSNR; -inf without a ground truth (so it is never the best)."""
    return float(record.psnr.mean()) if record.psnr is not None else -math.inf


def grid_progress(best: float, since: int, psnr: float) -> tuple[float, int]:
    """(best PSNR so far, grid points past it) after a point of PSNR ``psnr``.

    A point is past the best only where the PSNR has fallen: at large alpha the reconstruction
    is the same flat image for several grid points (equal PSNRs), and counting that plateau
    stopped the grid before it reached the useful range."""
    if psnr > best:
        return psnr, 0
    return best, since + 1 if psnr < best - GRID_FLAT_DB else since


def warm_grid(problem: Problem, method: str, max_iter: int | None = None,
              limit: int | None = None) -> list[tuple[float, IterateRecord]]:
    """(alpha, final record) along the wide grid, each solve warm-started from the previous
    alpha's; stops GRID_PAST points past the best mean PSNR (points whose PSNR fell more than
    GRID_FLAT_DB below it), at GRID_MIN, or after ``limit`` points."""
    import dataclasses

    from lbi_engine.settings.defaults import REQUEST_DEFAULTS
    from lbi_engine.solvers import StopRule, final, solve, warm_start

    stop = StopRule(max_iter=max_iter or REQUEST_DEFAULTS["max_iter"],
                    tol=REQUEST_DEFAULTS["tol"], tol_mode=REQUEST_DEFAULTS["tol_mode"])
    out: list[tuple[float, IterateRecord]] = []
    alpha, init, best, since = GRID_START, None, -math.inf, 0
    while alpha >= GRID_MIN and since < GRID_PAST and (limit is None or len(out) < limit):
        at = dataclasses.replace(problem, alpha=alpha, extras=dict(problem.extras))
        last = final(solve(at, method, stop=stop, init=init))
        init = warm_start(last, at)
        for key in ("x_prev", "momentum"):
            init.pop(key, None)
        out.append((alpha, last))
        best, since = grid_progress(best, since, _mean_psnr(last))
        alpha *= GRID_FACTOR
    return out


def run(out_dir: str | Path, quick: bool = False, overwrite: bool = False,
        progress: Callable[[str], None] | None = None) -> Report:
    """The paper's study on the MNIST CNN autoencoder (``lbi reproduce noise``)."""
    return run_study(MNIST, out_dir, quick, overwrite, progress)


def run_natural(out_dir: str | Path, quick: bool = False, overwrite: bool = False,
                progress: Callable[[str], None] | None = None) -> Report:
    """The same study on the residual colour-patch autoencoder (``lbi reproduce natural``)."""
    return run_study(NATURAL, out_dir, quick, overwrite, progress)


def run_study(study: Study, out_dir: str | Path, quick: bool = False, overwrite: bool = False,
              progress: Callable[[str], None] | None = None) -> Report:
    """Decoder vs inversion (best grid alpha, alpha auto, the learned prior) per noise std."""
    import torch

    from lbi_engine.api import InversionRequest
    from lbi_engine.experiments.batch import (
        dataset_truths,
        display_images,
        prepare_batch,
        sample_metrics,
        spread_indices,
    )
    from lbi_engine.models.zoo import load_network
    from lbi_engine.results.plotting import Series, image_grid, line_plot

    report = Report(study.title, Path(out_dir), quick=quick, overwrite=overwrite)
    stds = QUICK["stds"] if quick else study.stds
    count = QUICK["samples"] if quick else study.samples
    max_iter = QUICK["max_iter"] if quick else None
    network, item, items = study.network, study.item, study.items
    bundle = load_network(network)
    indices = spread_indices(study.dataset, study.split, count)
    truths = dataset_truths(study.dataset, study.split, indices)
    levels: list[dict[str, Any]] = []
    grid_rows: list[list[Any]] = [[truths[0]], [], [], []]
    captions: list[list[str]] = [["truth"], [], [], []]
    for s_index, std in enumerate(stds):
        if progress is not None:
            progress(f"std {std:g} ({s_index + 1}/{len(stds)}): wide alpha grid")
        extra: dict[str, Any] = {"max_iter": max_iter} if max_iter else {}
        request = InversionRequest(network=network, dataset=study.dataset, split=study.split,
                                   noise_std=std, seed=0, alpha=GRID_START, method=METHOD,
                                   regulariser="tv", **extra)
        base = prepare_batch(request, truths, seeds=indices, bundle=bundle)
        grid = warm_grid(base.problem, METHOD, max_iter, QUICK["grid"] if quick else None)
        best_alpha, best_rec = max(grid, key=lambda g: _mean_psnr(g[1]))
        best_run = base.with_alpha(best_alpha)
        results = sample_metrics(best_run, best_rec)
        with torch.no_grad():  # the model's objective at the truth, at the best grid alpha
            truth_obj = best_run.problem.objective_parts(best_run.problem.x_true)["total"]
        if progress is not None:
            progress(f"std {std:g}: alpha auto per {item}")
        auto = [_auto_run(study, bundle, index, std, max_iter) for index in indices]
        prior = [_auto_run(study, bundle, index, std, max_iter, PRIOR) for index in indices]
        level = {
            "std": std,
            "delta_squared": mean(base.delta_squared),
            "delta_squared_range": (min(base.delta_squared), max(base.delta_squared)),
            "decoder_psnr": mean(base.decoder_psnr),
            "best_alpha": best_alpha,
            "psnr": mean([m["psnr"] for m in results]),
            "ssim": mean([m["ssim"] for m in results]),
            "objective_truth": float(truth_obj.mean()),
            "objective_min": float(best_rec.objective.mean()),
            "auto_psnr": mean([a["psnr"] for a in auto]),
            "auto_alpha": _geometric_mean([a["alpha"] for a in auto]),
            "auto_rule": ", ".join(sorted({a["alpha_rule"] for a in auto})),
            "auto_seconds": mean([a["seconds"] for a in auto]),
            "prior_psnr": mean([a["psnr"] for a in prior]),
            "prior_alpha": _geometric_mean([a["alpha"] for a in prior]),
            "prior_seconds": mean([a["seconds"] for a in prior]),
            "per_alpha": [(a, _mean_psnr(r)) for a, r in grid],
        }
        levels.append(level)
        assert base.decoder_images is not None  # a study's network is an autoencoder
        grid_rows[1].append(base.decoder_images[0])
        grid_rows[2].append(display_images(best_run, best_rec)[0])
        grid_rows[3].append(auto[0]["image"])
        captions[1].append(f"s={std:g}\n{num(base.decoder_psnr[0])} dB")
        captions[2].append(f"α={best_alpha:.3g}\n{num(results[0]['psnr'])} dB")
        captions[3].append(f"α={auto[0]['alpha']:.3g}\n{num(auto[0]['psnr'])} dB")
    report.numbers["levels"] = levels

    std_axis = [lv["std"] for lv in levels]
    psnr_plot = line_plot(
        report.path("noise_psnr.png"),
        [Series(std_axis, [lv["decoder_psnr"] for lv in levels], "decoder D(y^δ)", "s--"),
         Series(std_axis, [lv["psnr"] for lv in levels], "inversion (best grid α)", "o-"),
         Series(std_axis, [lv["auto_psnr"] for lv in levels], "inversion (α auto)", "^-"),
         Series(std_axis, [lv["prior_psnr"] for lv in levels], "Gaussian prior + box (α auto)",
                "v-")],
        title=f"Mean PSNR over {count} validation {items}", xlabel="noise std on the code",
        ylabel="PSNR (dB)", overwrite=report.overwrite,
    )
    delta_plot = line_plot(
        report.path("noise_delta_squared.png"),
        [Series(std_axis, [lv["delta_squared"] for lv in levels], "mean δ²", "o-")],
        title="Noise level δ² = B_Ψ(y^δ, W x_(L-1)† + b)", xlabel="noise std on the code",
        ylabel="δ²", overwrite=report.overwrite,
    )
    digits = image_grid(report.path(f"noise_{items}.png"), grid_rows,
                        row_labels=["truth", "decoder", "best grid α", "α auto"],
                        captions=captions, overwrite=report.overwrite)
    report.add(f"""
Network `{network}` (sha256 `{str(bundle.sha256)[:16]}…`), method `{METHOD}` with TV, every
other setting at the CLI default (objective stop rule, tolerance 1e-4{
    f", at most {max_iter} iterations (quick)" if max_iter else ""}). Data: validation {items}
{", ".join(map(str, indices))} of `{study.dataset}` ({study.spacing}); sample i's
noise uses seed i. Best grid α: the grid point with the best mean PSNR over the {items} (grid
from {GRID_START:.3g} down by a factor {GRID_FACTOR:.3g} until {GRID_PAST} points past the
best, i.e. more than {GRID_FLAT_DB:g} dB below it). α auto: `lbi invert --alpha auto` per
{item} (discrepancy rule with the noise std; at std 0 quasi-optimality), mean of the PSNRs,
geometric mean of the chosen α. Gaussian prior:
`lbi invert --regulariser {PRIOR}` per {item} (the learned input prior shipped beside the
network, fitted on the training split; α auto = its noise-scaled rule, MATH.md §4.3).""")
    report.add("## PSNR per noise level\n\n" + table(
        ["noise std", "mean δ²", "decoder PSNR", "PSNR at best grid α", "best grid α",
         "PSNR at α auto", "α auto (mean)", "rule", "objective at truth",
         "objective at minimiser", "PSNR Gaussian prior + box", "its α (mean)",
         "time TV α auto (s)", "time Gaussian prior (s)"],
        [[lv["std"], lv["delta_squared"], lv["decoder_psnr"], lv["psnr"], lv["best_alpha"],
          lv["auto_psnr"], lv["auto_alpha"], lv["auto_rule"], lv["objective_truth"],
          lv["objective_min"], lv["prior_psnr"], lv["prior_alpha"], lv["auto_seconds"],
          lv["prior_seconds"]] for lv in levels]))
    worse = [lv["std"] for lv in levels if lv["psnr"] is not None
             and lv["decoder_psnr"] is not None and lv["psnr"] < lv["decoder_psnr"]]
    report.add(f"Objectives at the best grid α, means over the {items}. Where the minimiser's "
               "objective is below the truth's, the solver did its job: a PSNR below the "
               "decoder's there is the model's (network + TV prior), not the solver's."
               + (" The inversion at its best grid α loses to the decoder at noise std "
                  + ", ".join(f"{s:g}" for s in worse) + "." if worse else
                  " The inversion at its best grid α beats the decoder at every noise std."))
    report.add("## Mean inversion PSNR (dB) along the grid\n\n" + "\n".join(
        f"- std {lv['std']:g}: " + ", ".join(f"α={a:.3g}: {num(v)}" for a, v in lv["per_alpha"])
        for lv in levels))
    report.figure(psnr_plot, "PSNR of the decoder and of the inversion against the noise std")
    report.figure(delta_plot, "Mean noise level δ² per std")
    report.figure(digits, f"Validation {item} {indices[0]}: decoder output, inversion at the "
                          "best grid α and at α auto per noise std")
    report.add("The same study as a resumable sweep (CSV + plots; `auto` cells choose α per "
               f"{item}):\n\n" + command_line([
                   "lbi sweep --network", network, f"--method {METHOD}",
                   "--alphas log:1e-4:0.56:16,auto",
                   "--noise-stds " + ",".join(f"{s:g}" for s in stds),
                   *([f"--dataset {study.dataset}"] if study.dataset != "mnist" else []),
                   f"--samples {','.join(map(str, indices))} --split {study.split}",
                   "--out noise-sweep"]))
    report.write()
    return report


def _geometric_mean(values: list[float]) -> float | None:
    """exp(mean(log v)) over the finite logs; None when there is none (as ``mean``)."""
    log_mean = mean([math.log(v) for v in values])
    return None if log_mean is None else math.exp(log_mean)


def _auto_run(study: Study, bundle: Any, index: int, std: float, max_iter: int | None,
              regulariser: str | None = None) -> dict[str, Any]:
    """``lbi invert --sample INDEX --seed INDEX --noise-std STD [--regulariser R]`` at the
    defaults (alpha auto): its metrics and display image."""
    from lbi_engine import api
    from lbi_engine.solvers import final

    extra: dict[str, Any] = {"max_iter": max_iter} if max_iter else {}
    extra["regulariser"] = regulariser or "tv"
    request = api.InversionRequest(network=study.network, dataset=study.dataset,
                                   split=study.split, index=index, seed=index, noise_std=std,
                                   method=METHOD, **extra)
    prepared = api.prepare(request, bundle)
    last = final(api.iterate(prepared))
    return {**api.final_metrics(prepared, last).to_dict(),
            "image": prepared.to_display(last.x[0])}
