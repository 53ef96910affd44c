"""`lbi reproduce`: quick runs in the suite, full reproductions behind @pytest.mark.slow."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from PIL import Image

from lbi_engine.experiments import EXPERIMENTS

NUMBER = r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"


def _table_row(report: str, label: str) -> list[str]:
    line = next(line for line in report.splitlines() if line.startswith(f"| {label} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_circle_quick_writes_report_with_computed_numbers(tmp_path: Path, cli) -> None:
    code, stdout, err = cli("reproduce", "circle", "--quick", "--threads", "1", "--out", tmp_path)
    assert code == 0, err
    assert "report.md" in stdout
    report = (tmp_path / "report.md").read_text()
    truth = _table_row(report, "ground truth")
    # the disc of MATH.md §9.1: 788 pixels, l2 = sqrt(788), aniso TV 128, iso TV 116.87
    assert truth[1:] == ["28.07", "28.07", "116.87", "128.00", "128.0"]
    for label in ("Landweber", "TV"):
        row = _table_row(report, label)
        assert all(re.fullmatch(NUMBER, cell) for cell in (row[1], row[3], row[4])), row
    landweber, tv = _table_row(report, "Landweber"), _table_row(report, "TV")
    assert float(landweber[1]) < float(tv[1])  # Landweber: minimum-norm-like, small l2
    assert float(landweber[3]) > float(tv[3])  # ... and a much larger TV
    assert re.search(r"Run time: \*\*\d+\.\d s\*\*", report)
    for png in tmp_path.glob("*.png"):
        assert Image.open(png).size[0] > 100
    assert len(list(tmp_path.glob("*.png"))) == 3


def test_convergence_quick_reports_a_slope_and_the_bound(tmp_path: Path, cli) -> None:
    code, _, err = cli("reproduce", "convergence", "--quick", "--out", tmp_path)
    assert code == 0, err
    report = (tmp_path / "report.md").read_text()
    slope = float(re.search(r"Fitted slope .*?\*\*(" + NUMBER + r")\*\*", report).group(1))
    assert 0.5 < slope < 2.5
    assert "below the bound: **True**" in report
    assert "componentwise source condition holds at every level" in report


def test_mnist_perceptron_quick_uses_batches_of_distinct_digits(tmp_path: Path, cli) -> None:
    code, _, err = cli("reproduce", "mnist-perceptron", "--quick", "--out", tmp_path)
    assert code == 0, err
    report = (tmp_path / "report.md").read_text()
    rows = [line for line in report.splitlines() if line.startswith(("| train |", "| val |"))]
    per_digit = [r for r in rows if len(r.split("|")) > 8]
    assert [r.split("|")[2].strip() for r in per_digit] == ["0", "2000", "0", "500"]
    for row in per_digit:
        decoder, inversion = (float(row.split("|")[k]) for k in (4, 5))
        assert 5 < decoder < 60 and 5 < inversion < 60
    assert (tmp_path / "mnist-perceptron_digits.png").exists()


def test_overwrite_replaces_report_and_figures(tmp_path: Path, cli) -> None:
    assert cli("reproduce", "convergence", "--quick", "--out", tmp_path)[0] == 0
    code, _, err = cli("reproduce", "convergence", "--quick", "--overwrite", "--out", tmp_path)
    assert code == 0, err


def test_existing_report_is_not_overwritten(tmp_path: Path, cli) -> None:
    (tmp_path / "report.md").write_text("keep me")
    code, _, err = cli("reproduce", "convergence", "--quick", "--out", tmp_path)
    assert code == 2 and "--overwrite" in err
    assert (tmp_path / "report.md").read_text() == "keep me"


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_full_reproduction(name: str, tmp_path: Path, cli) -> None:
    code, _, err = cli("reproduce", name, "--out", tmp_path)
    assert code == 0, err
    report = (tmp_path / "report.md").read_text()
    assert "full run" in report and "quick" not in report.split("Run time:")[1]
    assert list(tmp_path.glob("*.png"))


def test_noise_quick_reports_decoder_best_grid_auto_and_objectives(tmp_path: Path, cli) -> None:
    code, _, err = cli("reproduce", "noise", "--quick", "--threads", "1", "--out", tmp_path)
    assert code == 0, err
    report = (tmp_path / "report.md").read_text()
    row = _table_row(report, "0.1")
    assert len(row) == 14 and row[7] == "discrepancy", row
    numbers = [float(row[k]) for k in (1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13)]
    assert all(math.isfinite(v) for v in numbers)
    assert numbers[6] > 0 and numbers[7] > 0  # objective at the truth, at the minimiser
    assert float(row[11]) == pytest.approx(0.1**2 / 8, rel=1e-3)  # the Gaussian prior's rule


def test_natural_quick_runs_the_noise_study_on_the_residual_colour_network(tmp_path: Path,
                                                                          cli) -> None:
    code, _, err = cli("reproduce", "natural", "--quick", "--threads", "1", "--out", tmp_path)
    assert code == 0, err
    report = (tmp_path / "report.md").read_text()
    assert "Network `natural-res-ae`" in report and "validation patches" in report
    row = _table_row(report, "0.1")
    numbers = [float(row[k]) for k in (1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13)]
    assert all(math.isfinite(v) for v in numbers)
    assert 15 < float(row[2]) < 40  # the decoder's PSNR on a photograph patch
    assert "--dataset natural" in report
    assert Image.open(tmp_path / "noise_patches.png").mode in ("RGB", "RGBA")
    # --overwrite replaces the figures too (they were refused after the whole study had run)
    code, _, err = cli("reproduce", "natural", "--quick", "--threads", "1", "--overwrite",
                       "--out", tmp_path)
    assert code == 0, err


def test_the_alpha_grid_walks_over_a_plateau_and_stops_past_the_peak() -> None:
    from lbi_engine.experiments.noise_levels import GRID_PAST, grid_progress

    # the flat image of large alphas (equal PSNRs), then the rise, the peak and the fall
    psnrs = [13.85, 13.85, 13.85, 13.85, 16.2, 21.0, 24.4, 24.3, 23.1, 21.9, 20.0]
    best, since, seen = -math.inf, 0, []
    for psnr in psnrs:
        if since >= GRID_PAST:
            break
        seen.append(psnr)
        best, since = grid_progress(best, since, psnr)
    assert best == 24.4 and seen == psnrs[:9]  # stopped two falling points past the peak


def test_convergence_tv_construction_meets_the_source_condition_exactly() -> None:
    """W^T v† is a TV subgradient at x† (xi† = -div p, |p| <= 1, <xi†, x†> = TV(x†)), v† lives
    on the active rows, and z† = W x† + b has the designed signs: the theorem's assumptions."""
    import torch

    from lbi_engine.experiments.convergence import QUICK, build
    from lbi_engine.regularisers import make_regulariser

    parts = build(QUICK, prior="tv")
    w, b, v, x, xi = (parts[k] for k in ("weight", "bias", "v", "x_true", "xi_true"))
    torch.testing.assert_close(w.T @ v, xi, rtol=0, atol=1e-12)
    assert float(v[QUICK.active:].abs().max()) == 0.0
    side = QUICK.side
    tv = make_regulariser("tv")
    image = x.reshape(1, 1, side, side)
    assert float(xi @ x) == pytest.approx(float(tv.value(image)[0]), rel=1e-12)
    p = tv.dual_certificate(image)
    assert float(p.pow(2).sum(dim=1).sqrt().max()) <= 1 + 1e-12
    z = w @ x + b
    assert bool((z[:QUICK.active] >= 0.5).all()) and bool((z[QUICK.active:] <= -0.5).all())
    assert float(tv.value(image)[0]) > 0 and float(xi.norm()) == pytest.approx(float(v.norm()))


def test_convergence_tikhonov_variant_stays_available(tmp_path: Path) -> None:
    from lbi_engine.experiments.convergence import run

    report = run(tmp_path, quick=True, prior="tikhonov")
    text = (tmp_path / "report.md").read_text()
    assert "R = ½||x||²" in text and "below the bound: **True**" in text
    assert report.numbers["slope"] > 0.5
