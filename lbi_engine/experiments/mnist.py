"""Paper Sec. 5.1 (MNIST) and 5.2 (MATH.md §9.2, §9.3): inverting autoencoders' encoders.

Five training and five validation digits (the first five of each bundled split); for each:
the ground truth, the decoder output D(y) and the TV-regularised inversion of the encoder,
with PSNRs. The five digits of a split are solved in one batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lbi_engine.experiments.report import Report, command_line, mean, num, table


@dataclass(frozen=True)
class AutoencoderSetup:
    """One of the paper's two autoencoder experiments."""

    key: str
    title: str
    network: str
    method: str
    alpha_train: float
    alpha_val: float
    max_iter: int
    noise_std: float = 0.0
    samples: int = 5
    quick_samples: int = 2
    quick_max_iter: int = 60
    note: str = ""


PERCEPTRON = AutoencoderSetup(
    key="mnist-perceptron",
    title="MNIST perceptron autoencoder (paper Sec. 5.1, Fig. 2)",
    network="mnist-perceptron-ae",
    method="pdhg",
    alpha_train=5e-3,
    alpha_val=5e-2,
    max_iter=10_000,
    note="Encoder ReLU(W1 x + b1), W1 in R^{100x784}, centred images (scalar training mean "
         "subtracted); TV-PDHG with the safe step sizes, relative tolerance 1e-5.",
)
CNN = AutoencoderSetup(
    key="mnist-cnn",
    title="MNIST convolutional autoencoder (paper Sec. 5.2, Fig. 3)",
    network="mnist-cnn-ae",
    method="joint",
    alpha_train=9e-3,
    alpha_val=9e-3,
    max_iter=1500,
    quick_max_iter=40,
    note="Encoder Conv(1,8,4,2,1)+ReLU, Conv(8,16,4,2,1)+ReLU, Linear(784,300) (identity code); "
         "joint coordinate descent (paper eqs. 13-15), one PDHG step per sweep, relative "
         "tolerance 1e-5, at most 1500 sweeps.",
)


def run_setup(setup: AutoencoderSetup, out_dir: str | Path, quick: bool = False,
              overwrite: bool = False, progress: Callable[[str], None] | None = None) -> Report:
    from lbi_engine.api import InversionRequest
    from lbi_engine.experiments.batch import (
        dataset_truths,
        display_images,
        prepare_batch,
        sample_metrics,
        solve_batch,
        spread_indices,
    )
    from lbi_engine.models.zoo import load_network
    from lbi_engine.results.plotting import image_grid

    report = Report(setup.title, Path(out_dir), quick=quick, overwrite=overwrite)
    count = setup.quick_samples if quick else setup.samples
    max_iter = setup.quick_max_iter if quick else setup.max_iter
    bundle = load_network(setup.network)
    grid_rows: list[list[Any]] = []
    captions: list[list[str]] = []
    labels: list[str] = []
    rows = []
    for split, alpha in (("train", setup.alpha_train), ("val", setup.alpha_val)):
        indices = spread_indices("mnist", split, count)
        request = InversionRequest(
            network=setup.network, dataset="mnist", split=split, index=indices[0],
            noise_std=setup.noise_std, seed=0, alpha=alpha, regulariser="tv",
            method=setup.method, steps="safe", max_iter=max_iter, tol=1e-5, report_every=50,
        )
        batch = prepare_batch(request, dataset_truths("mnist", split, indices),
                              seeds=[0] * count, bundle=bundle)

        def report_progress(record: Any, split: str = split) -> None:
            if progress is not None:
                progress(f"{split}: iteration {record.iteration}/{max_iter}")

        final = solve_batch(batch, on_record=report_progress)
        results = sample_metrics(batch, final)
        recon = display_images(batch, final)
        assert batch.decoder_images is not None  # the experiments' autoencoders have decoders
        grid_rows += [list(batch.truths), list(batch.decoder_images), recon]
        labels += [f"{split}: truth", f"{split}: decoder", f"{split}: inversion"]
        captions += [[f"#{i}" for i in indices],
                     [f"{num(m['decoder_psnr'])} dB" for m in results],
                     [f"{num(m['psnr'])} dB" for m in results]]
        for i, m in zip(indices, results, strict=True):
            rows.append([split, i, alpha, m["decoder_psnr"], m["psnr"], m["ssim"],
                         m["iterations"], m["stop_reason"] or "", m["seconds"]])
        report.numbers[split] = {
            "alpha": alpha,
            "decoder_psnr": [m["decoder_psnr"] for m in results],
            "psnr": [m["psnr"] for m in results],
            "mean_decoder_psnr": mean([m["decoder_psnr"] for m in results]),
            "mean_psnr": mean([m["psnr"] for m in results]),
        }
    figure = image_grid(report.path(f"{setup.key}_digits.png"), grid_rows, row_labels=labels,
                        captions=captions, title=setup.title,
                        overwrite=report.overwrite)
    sha = str(bundle.sha256)[:16]
    report.add(f"""
Network `{setup.network}` (sha256 `{sha}…`). {setup.note}
Data: {count} digits of each bundled split, evenly spaced (the splits are sorted by label),
noise-free
code y = E(x†) (noise std {setup.noise_std:g}; the paper does not state a noise level here).
α = {setup.alpha_train:g} for training digits and {setup.alpha_val:g} for validation digits.
Each split's digits are solved together in one batch.""")
    summary = [[split, report.numbers[split]["alpha"], report.numbers[split]["mean_decoder_psnr"],
                report.numbers[split]["mean_psnr"]] for split in ("train", "val")]
    report.add("## Mean PSNR\n\n" + table(["split", "α", "decoder PSNR (dB)",
                                           "inversion PSNR (dB)"], summary))
    report.add("## Per digit\n\n" + table(
        ["split", "index", "α", "decoder PSNR", "inversion PSNR", "SSIM", "batch iterations",
         "stop reason", "batch solver s"], rows))
    report.figure(figure, "Rows: ground truth, decoder output D(y), inversion; PSNR in dB")
    report.add("Repeat one digit (same numbers up to batching round-off):\n\n" + command_line([
        "lbi invert --network", setup.network, "--dataset mnist --split val --sample 0",
        f"--noise-std {setup.noise_std:g} --seed 0 --alpha {setup.alpha_val:g}",
        f"--regulariser tv --method {setup.method} --max-iter {max_iter} --tol 1e-5",
        "--out digit0"]))
    report.write()
    return report


def run_perceptron(out_dir: str | Path, quick: bool = False, overwrite: bool = False,
                   progress: Callable[[str], None] | None = None) -> Report:
    return run_setup(PERCEPTRON, out_dir, quick, overwrite, progress)


def run_cnn(out_dir: str | Path, quick: bool = False, overwrite: bool = False,
            progress: Callable[[str], None] | None = None) -> Report:
    return run_setup(CNN, out_dir, quick, overwrite, progress)
