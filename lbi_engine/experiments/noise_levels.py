"""Paper Sec. 5.2, Fig. 4-5 (MATH.md §9.3): PSNR of decoder and inversion against noise.

Gaussian noise of std s is added to the CNN encoder's code; for every s the inversion's
alpha is picked from a log grid in [1e-4, 1e-2] by the best mean PSNR (the paper picks it
by hand), and compared with the decoder applied to the noisy code. delta^2 is computed per
image with MATH.md §7 (it is not the paper's 6.80 at s = 0.33, see [AMBIGUITY 15]).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from lbi_engine.experiments.report import Report, command_line, mean, num, table

NETWORK = "mnist-cnn-ae"
METHOD = "joint"
STDS = (0.33, 0.25, 0.2, 0.15, 0.1, 0.05, 0.02, 0.01, 0.0)
ALPHAS = (1e-4, 3.16e-4, 1e-3, 3.16e-3, 1e-2)
SAMPLES = 5
MAX_ITER = 1500
QUICK = {"stds": (0.33, 0.1, 0.0), "alphas": (1e-3, 1e-2), "samples": 2, "max_iter": 20}



def run(out_dir: str | Path, quick: bool = False, overwrite: bool = False,
        progress: Callable[[str], None] | None = None) -> Report:
    from lbi_engine.api import InversionRequest
    from lbi_engine.experiments.batch import (
        dataset_truths,
        display_images,
        prepare_batch,
        sample_metrics,
        solve_batch,
        spread_indices,
    )
    from lbi_engine.plotting import Series, image_grid, line_plot
    from lbi_engine.zoo import load_network

    report = Report("Noise study: decoder vs inversion of the CNN encoder "
                    "(paper Sec. 5.2, Fig. 4-5)", out_dir, quick=quick, overwrite=overwrite)
    stds = QUICK["stds"] if quick else STDS
    alphas = QUICK["alphas"] if quick else ALPHAS
    count = QUICK["samples"] if quick else SAMPLES
    max_iter = QUICK["max_iter"] if quick else MAX_ITER
    bundle = load_network(NETWORK)
    indices = spread_indices("mnist", "val", count)
    truths = dataset_truths("mnist", "val", indices)
    levels: list[dict[str, Any]] = []
    grid_rows: list[list[Any]] = [[truths[0]], [], []]
    captions: list[list[str]] = [["truth"], [], []]
    for s_index, std in enumerate(stds):
        request = InversionRequest(
            network=NETWORK, dataset="mnist", split="val", noise_std=std, seed=0,
            alpha=alphas[0], regulariser="tv", method=METHOD, steps="safe",
            max_iter=max_iter, tol=1e-5, report_every=max_iter,
        )
        base = prepare_batch(request, truths, seeds=indices, bundle=bundle)
        per_alpha = []
        best: dict[str, Any] | None = None
        for a_index, alpha in enumerate(alphas):
            if progress is not None:
                progress(f"std {std:g} ({s_index + 1}/{len(stds)}), alpha {alpha:g} "
                         f"({a_index + 1}/{len(alphas)})")
            run_ = base.with_alpha(alpha)
            final = solve_batch(run_)
            results = sample_metrics(run_, final)
            psnr = mean([m["psnr"] for m in results])
            per_alpha.append(psnr)
            if best is None or (psnr is not None and psnr > best["psnr"]):
                best = {"alpha": alpha, "psnr": psnr, "results": results,
                        "image": display_images(run_, final)[0]}
        assert best is not None
        level = {
            "std": std,
            "delta_squared": mean(base.delta_squared),
            "delta_squared_range": (min(base.delta_squared), max(base.delta_squared)),
            "decoder_psnr": mean(base.decoder_psnr),
            "best_alpha": best["alpha"],
            "psnr": best["psnr"],
            "ssim": mean([m["ssim"] for m in best["results"]]),
            "per_alpha": per_alpha,
        }
        levels.append(level)
        grid_rows[1].append(base.decoder_images[0])
        grid_rows[2].append(best["image"])
        captions[1].append(f"s={std:g}\n{num(base.decoder_psnr[0])} dB")
        captions[2].append(f"α={best['alpha']:g}\n{num(best['results'][0]['psnr'])} dB")
    report.numbers["levels"] = levels

    std_axis = [lv["std"] for lv in levels]
    psnr_plot = line_plot(
        report.path("noise_psnr.png"),
        [Series(std_axis, [lv["decoder_psnr"] for lv in levels], "decoder D(y^δ)", "s--"),
         Series(std_axis, [lv["psnr"] for lv in levels], "inversion (best α)", "o-")],
        title=f"Mean PSNR over {count} validation digits", xlabel="noise std on the code",
        ylabel="PSNR (dB)",
    )
    delta_plot = line_plot(
        report.path("noise_delta_squared.png"),
        [Series(std_axis, [lv["delta_squared"] for lv in levels], "mean δ²", "o-")],
        title="Noise level δ² = B_Ψ(y^δ, W x_(L-1)† + b)", xlabel="noise std on the code",
        ylabel="δ²",
    )
    digits = image_grid(report.path("noise_digits.png"), grid_rows,
                        row_labels=["truth", "decoder", "inversion"], captions=captions)
    report.add(f"""
Network `{NETWORK}` (sha256 `{str(bundle.sha256)[:16]}…`), method `{METHOD}` (TV, safe
steps, at most {max_iter} sweeps, relative tolerance 1e-5). Data: validation digits
{", ".join(map(str, indices))} (evenly spaced: the split is sorted by label); sample i's
noise uses seed i. For each noise std, α is the value of the
grid {", ".join(f"{a:g}" for a in alphas)} with the best mean PSNR over the digits.""")
    report.add("## PSNR per noise level\n\n" + table(
        ["noise std", "mean δ²", "δ² range", "decoder PSNR (dB)", "inversion PSNR (dB)",
         "best α", "inversion SSIM"],
        [[lv["std"], lv["delta_squared"],
          f"{num(lv['delta_squared_range'][0])} – {num(lv['delta_squared_range'][1])}",
          lv["decoder_psnr"], lv["psnr"], lv["best_alpha"], lv["ssim"]] for lv in levels]))
    at_edge = [lv["std"] for lv in levels if lv["best_alpha"] in (min(alphas), max(alphas))]
    if at_edge:
        report.add("Note: for noise std " + ", ".join(f"{s:g}" for s in at_edge) + " the best "
                   "α lies at an end of the grid, so the PSNR-optimal α is probably outside "
                   f"[{min(alphas):g}, {max(alphas):g}]; widen the grid with "
                   "`lbi sweep` to find it.")
    report.add("## Mean inversion PSNR (dB) for every α\n\n" + table(
        ["noise std", *[f"α={a:g}" for a in alphas]],
        [[lv["std"], *lv["per_alpha"]] for lv in levels]))
    report.figure(psnr_plot, "PSNR of the decoder and of the inversion against the noise std")
    report.figure(delta_plot, "Mean noise level δ² per std")
    report.figure(digits, f"Validation digit {indices[0]}: decoder output and best inversion "
                          "per noise std")
    report.add("The same grid as a resumable sweep (CSV + plots):\n\n" + command_line([
        "lbi sweep --network", NETWORK, f"--method {METHOD}",
        "--alphas " + ",".join(f"{a:g}" for a in alphas),
        "--noise-stds " + ",".join(f"{s:g}" for s in stds),
        f"--samples {','.join(map(str, indices))} --split val --max-iter {max_iter}",
        "--out noise-sweep"]))
    report.write()
    return report
