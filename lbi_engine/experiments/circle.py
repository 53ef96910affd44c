"""Paper Sec. 5.1 (MATH.md §9.1): a disc seen through a random ReLU perceptron.

Ground truth: the 64x64 binary disc 1{u^2 + v^2 <= 0.25} on linspace(-1, 1, 64) (788 px).
Network: the zoo's ``circle-perceptron`` (W in R^{512x4096}, b, ReLU; PyTorch default init).
Data: y^delta = max(y + 0.005 n, 0). Compared: Landweber with the discrepancy principle
(eta = 1.05, tau = 1/||W||^2) and the TV-regularised inversion (PDHG, alpha = 1.5e-2).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from lbi_engine.experiments.report import Report, command_line, num, table

NETWORK = "circle-perceptron"
ALPHA = 1.5e-2
NOISE_STD = 0.005
SEED = 0
MAX_ITER = 10_000
QUICK_MAX_ITER = 300
LANDWEBER_MAX_ITER = 10_000
#: The paper's Table (Sec. 5.1): l2 norm and TV of ground truth, Landweber and TV solution.
#: Strings, so that they are shown exactly as printed in the paper.
PAPER = {"ground truth": ("28.07", "128.0"), "Landweber": ("6.58", "707.02"),
         "TV": ("25.69", "114.93")}



def run(out_dir: str | Path, quick: bool = False, overwrite: bool = False,
        progress: Any = None) -> Report:
    """Runs the experiment and writes figures + report.md into ``out_dir``."""
    from lbi_engine import metrics
    from lbi_engine.api import InversionRequest, iterate, prepare
    from lbi_engine.results.plotting import Series, image_grid, line_plot

    report = Report("Circle: Landweber vs TV inversion of a ReLU perceptron "
                    "(paper Sec. 5.1, Fig. 1)", Path(out_dir), quick=quick, overwrite=overwrite)
    max_iter = QUICK_MAX_ITER if quick else MAX_ITER
    request = InversionRequest(
        network=NETWORK, dataset="cartoon", split="disc", index=0, noise_std=NOISE_STD,
        seed=SEED, alpha=ALPHA, regulariser="tv", method="pdhg", steps="safe",
        max_iter=max_iter, tol=1e-5, tol_mode="relative", report_every=10,
    )
    prepared = prepare(request)
    runs: dict[str, tuple[Any, list[Any]]] = {}
    for label, method, cap in (("Landweber", "landweber", LANDWEBER_MAX_ITER),
                               ("TV", "pdhg", max_iter)):
        # Landweber stops after a handful of steps: record every one for its residual plot.
        req = dataclasses.replace(request, method=method, max_iter=cap,
                                  report_every=1 if method == "landweber" else 10)
        view = prepared.with_request(req)
        records = []
        for record in iterate(view):
            records.append(record)
            if progress is not None:
                progress(f"{label}: iteration {record.iteration}")
        runs[label] = (view, records)

    truth = prepared.problem.x_true
    # the data are simulated from a known image: truth, its shape and the noise are known
    assert truth is not None and prepared.problem.image_shape is not None
    assert prepared.noise_norm is not None and prepared.delta_squared is not None
    shape = (1, *prepared.problem.image_shape)
    rows = []
    images = {"ground truth": prepared.truth_image}
    values: dict[str, tuple[float, float, float]] = {}
    for label, x in [("ground truth", truth)] + [(k, v[1][-1].x) for k, v in runs.items()]:
        image = x.reshape(shape)
        l2 = float(metrics.l2_norm(x)[0])
        iso, aniso = float(metrics.tv_iso(image)[0]), float(metrics.tv_aniso(image)[0])
        values[label] = (l2, iso, aniso)
        paper_l2, paper_tv = PAPER[label]
        rows.append([label, l2, paper_l2, iso, aniso, paper_tv])
        if label != "ground truth":
            images[label] = runs[label][0].to_display(x[0])
    report.numbers["table"] = values

    stats = []
    for label, (_view, records) in runs.items():
        final = records[-1]
        assert final.psnr is not None  # the ground truth is known
        stats.append([label, final.iteration, final.stop_reason or "", float(final.psnr[0]),
                      float(final.ssim[0]) if final.ssim is not None else None,
                      float(final.objective[0]), float(final.discrepancy[0]),
                      final.elapsed])
        report.numbers[label] = {"iterations": final.iteration, "psnr": float(final.psnr[0]),
                                 "stop_reason": final.stop_reason}

    grid = image_grid(
        report.path("circle_reconstructions.png"),
        [[images["ground truth"], images["Landweber"], images["TV"]]],
        captions=[[f"ground truth\nl2 {num(values['ground truth'][0])}",
                   f"Landweber (k={runs['Landweber'][1][-1].iteration})\n"
                   f"PSNR {num(float(runs['Landweber'][1][-1].psnr[0]))} dB",
                   f"TV, alpha={ALPHA:g}\nPSNR {num(float(runs['TV'][1][-1].psnr[0]))} dB"]],
        vmin=None, vmax=None, cell=2.4, overwrite=report.overwrite,
    )
    tv_records = runs["TV"][1]
    curve = line_plot(
        report.path("circle_tv_objective.png"),
        [Series([r.iteration for r in tv_records], [float(r.objective[0]) for r in tv_records],
                "objective", "-")],
        title="TV inversion: objective per iteration", xlabel="iteration",
        ylabel="B_Psi(y^delta, Wx+b) + alpha TV(x)", logy=True, overwrite=report.overwrite,
    )
    lw_records = runs["Landweber"][1]
    discrepancy = line_plot(
        report.path("circle_landweber_discrepancy.png"),
        [Series([r.iteration for r in lw_records], [float(r.discrepancy[0]) for r in lw_records],
                "||sigma(Wx+b) - y^delta||", "o-"),
         Series([lw_records[0].iteration, lw_records[-1].iteration],
                [1.05 * prepared.noise_norm] * 2, "eta * ||y^delta - y|| (stop)", "--")],
        title="Landweber with the discrepancy principle", xlabel="iteration",
        ylabel="residual", logy=True, overwrite=report.overwrite,
    )

    w_norm_sq = float(prepared.problem.network.layers[0].affine.norm()) ** 2
    report.add(f"""
Ground truth: 64x64 disc (MATH.md §9.1), {int(round(float(truth.sum())))} pixels. Network
`{NETWORK}` (sha256 `{str(prepared.bundle.sha256)[:16]}…`), ||W||² = {num(w_norm_sq)}.
Noise: y^δ = max(y + {NOISE_STD} n, 0), seed {SEED}: ||y^δ − y|| = {num(prepared.noise_norm)},
δ² = B_Ψ(y^δ, Wx†+b) = {num(prepared.delta_squared)}.
Landweber: τ = 1/||W||², stopped by the discrepancy principle (η = 1.05, ||y^δ − y|| known).
TV: isotropic TV, α = {ALPHA:g}, PDHG with the safe step sizes, relative tolerance 1e-5,
at most {max_iter} iterations.""")
    report.add("## ℓ2 norms and TV seminorms\n\n" + table(
        ["", "ℓ2 (computed)", "ℓ2 (paper)", "TV iso (computed)", "TV aniso (computed)",
         "TV (paper)"], rows)
        + "\n\nThe paper's TV values mix variants (MATH.md [AMBIGUITY 7]): its ground-truth 128.0 "
          "is the anisotropic TV, its Landweber 707.02 fits the isotropic one; both are shown.")
    report.add("## Runs\n\n" + table(
        ["method", "iterations", "stop reason", "PSNR (dB)", "SSIM", "objective",
         "discrepancy", "solver s"], stats))
    report.figure(grid, "Ground truth, Landweber (discrepancy principle), TV inversion")
    report.figure(curve, "Objective of the TV inversion")
    report.figure(discrepancy, "Landweber residual against the discrepancy threshold")
    report.add("Repeat the TV run alone (same numbers):\n\n" + command_line([
        "lbi invert --network", NETWORK, "--dataset cartoon --split disc --sample 0",
        f"--noise-std {NOISE_STD} --seed {SEED} --alpha {ALPHA:g} --regulariser tv",
        f"--method pdhg --max-iter {max_iter} --tol 1e-5 --out circle-tv"]))
    report.write()
    return report
